package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	t.Setenv("CORDON_CONFIG", path)
	t.Setenv("CORDON_AUDIT_LOG", "")
	t.Setenv("CORDON_AUDIT_KEY", "")

	// No file: defaults.
	c, err := Load()
	if err != nil || c.File != "" || c.Audit.Log != DefaultAuditLog() {
		t.Fatalf("%+v %v", c, err)
	}

	os.WriteFile(path, []byte("audit:\n  log: /srv/audit/cordon.jsonl\n  key: /etc/k\n  max_size: 8MiB\n"), 0o644)
	c, err = Load()
	if err != nil || c.File != path || c.Audit.Log != "/srv/audit/cordon.jsonl" || c.Audit.Key != "/etc/k" || Size(c.Audit.MaxSize, 1) != 8<<20 || Size(c.Audit.Capture, 7) != 7 {
		t.Fatalf("%+v %v", c, err)
	}

	// The environment overrides the file.
	t.Setenv("CORDON_AUDIT_LOG", "/tmp/x.jsonl")
	if c, _ = Load(); c.Audit.Log != "/tmp/x.jsonl" {
		t.Fatalf("env: %+v", c)
	}

	for _, bad := range []struct{ text, want string }{
		{"audit:\n  lgo: x\n", "lgo"},
		{"audit:\n  max_size: lots\n", "audit.max_size"},
	} {
		os.WriteFile(path, []byte(bad.text), 0o644)
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v", bad.text, err)
		}
	}
}
