package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// A tool server's workspace is read-only but for what its tools'
// constraints let them write, when those directories exist; a tool that
// may write anywhere leaves the server's profile as it is.
func TestServerView(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "notes"), 0o755)
	var stderr bytes.Buffer
	e := &env{stdout: &stderr, stderr: &stderr, getenv: func(string) (string, bool) { return "", false }, cwd: dir}
	sp, err := profile.Parse("fs.yaml", []byte("version: 1\nagent: fs\nworkspace:\n  path: .\n  writable: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	agent := func(constraint string) *profile.Profile {
		src := "version: 1\nagent: a\nservers:\n  fs:\n    command: [x]\n    profile: fs.yaml\ntools:\n  fs__write:\n    class: write\n    paths: [path]\n"
		if constraint != "" {
			src += "    constraints: ['" + constraint + "']\n"
		}
		p, err := profile.Parse("a.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		constraint string
		want       []string
	}{
		{`args.path.within("notes/")`, []string{"--ro-workspace", "--rw", filepath.Join(dir, "notes")}},
		{`args.path.within("missing/")`, []string{"--ro-workspace"}},
		{`args.path.within("/elsewhere")`, []string{"--ro-workspace"}},
		{`args.path.within(".")`, nil},
		{``, nil},
	} {
		stderr.Reset()
		if got := serverView(e, agent(tt.constraint), "fs", sp); !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q (%s)", tt.constraint, got, tt.want, stderr.String())
		}
	}
	// A read-only workspace, one judged on a layer, or one seen elsewhere
	// than on the host stays as it is.
	for _, ws := range []string{"  writable: false\n", "  writable: true\n  mode: review\n", "  writable: true\n  target: /srv/ws\n"} {
		sp, err := profile.Parse("fs.yaml", []byte("version: 1\nagent: fs\nworkspace:\n  path: .\n"+ws))
		if err != nil {
			t.Fatal(err)
		}
		if got := serverView(e, agent(`args.path.within("notes/")`), "fs", sp); got != nil {
			t.Errorf("%s: %q", strings.TrimSpace(ws), got)
		}
	}
}
