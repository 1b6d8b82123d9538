package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/token"
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

func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	t.Setenv("CORDON_CONFIG", path)
	alice, aliceSum := token.New()
	agent, agentSum := token.New()
	os.WriteFile(path, []byte("approvers:\n  - name: alice\n    sha256: "+aliceSum+"\nmcp_clients:\n  - name: claude\n    sha256: "+agentSum+"\n"), 0o644)
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	// Each token is its holder's, and only in its own list.
	if name, ok := Identify(c.Approvers, alice); !ok || name != "alice" {
		t.Errorf("alice's token: %q %v", name, ok)
	}
	if name, ok := Identify(c.Approvers, agent); ok {
		t.Errorf("the agent's token is an approver's: %q", name)
	}
	if name, ok := Identify(c.MCPClients, agent); !ok || name != "claude" {
		t.Errorf("the agent's token: %q %v", name, ok)
	}
	for _, presented := range []string{"", aliceSum, "alice"} {
		if name, ok := Identify(c.Approvers, presented); ok {
			t.Errorf("%q is taken as %q's token", presented, name)
		}
	}

	entry := func(name, sum string) string { return "  - name: " + name + "\n    sha256: " + sum + "\n" }
	for _, bad := range []struct{ text, want string }{
		{"approvers:\n" + entry("alice", aliceSum) + entry("alice", agentSum), "approvers[1].name: a second token named \"alice\""},
		{"approvers:\n" + entry("alice", "abc"), "approvers[0].sha256: want the token's SHA-256"},
		{"approvers:\n" + entry("'al ice'", aliceSum), "approvers[0].name: want a name"},
		{"approvers:\n  - sha256: " + aliceSum + "\n", "approvers[0].name"},
		// An agent holding an approver's token could approve its own calls.
		{"approvers:\n" + entry("alice", aliceSum) + "mcp_clients:\n" + entry("claude", aliceSum), "mcp_clients[0].sha256: the same token as approvers[0]"},
		{"approvers:\n" + entry("alice", aliceSum) + entry("bob", aliceSum), "approvers[1].sha256: the same token as approvers[0]"},
	} {
		os.WriteFile(path, []byte(bad.text), 0o644)
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v, want %q", bad.text, err, bad.want)
		}
	}
}
