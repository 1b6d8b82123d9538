package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/server"
)

// cordon serve refuses to start when an agent's sandboxes could read the
// cluster's secret: with it, their code could pose as a node forwarding
// requests.
func TestServeClusterSecretHidden(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	os.MkdirAll(shared, 0o700)
	os.WriteFile(filepath.Join(shared, "cluster.secret"), []byte(strings.Repeat("s", 32)), 0o600)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("version: 1\nagent: a\nworkspace:\n  path: "+shared+"\n"), 0o644)
	_, sum := server.NewToken()
	cfg := "state: " + filepath.Join(dir, "state") + "\ncluster:\n  advertise: http://127.0.0.1:1\n  secret_file: shared/cluster.secret\n" +
		"agents:\n  a:\n    profile: p.yaml\ntokens:\n  - name: a-token\n    agent: a\n    sha256: " + sum + "\n"
	os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte(cfg), 0o644)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, cwd: dir, getenv: func(string) (string, bool) { return "", false }}
	code := serveCmd(e, []string{"--config", filepath.Join(dir, "serve.yaml"), "--audit-log", filepath.Join(dir, "audit", "audit.jsonl")})
	if code == 0 || !strings.Contains(out.String(), "cluster secret") {
		t.Fatalf("cordon serve with the cluster secret in a sandbox's view: %d\n%s", code, out.String())
	}
}
