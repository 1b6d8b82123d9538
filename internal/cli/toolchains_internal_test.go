package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// What cordon prints of toolchains quotes host paths, which anyone who
// names a directory chooses: no control character reaches the terminal.
func TestToolchainsTerminalSafe(t *testing.T) {
	root := t.TempDir()
	evil := filepath.Join(root, "e\x1b]0;owned\x07vil")
	if err := os.MkdirAll(filepath.Join(evil, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(evil, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"PATH": filepath.Join(evil, "bin")}
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, cwd: root, getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	p, err := profile.Parse(filepath.Join(root, "p\x1b[2J.yaml"), []byte("version: 1\nagent: a\ntoolchains: [tool, nosuch]\n"))
	if err != nil {
		t.Fatal(err)
	}

	if err := writeToolchains(e, &stdout, p, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := runToolchains(e, p, []string{"true"}); err != nil {
		t.Fatal(err)
	}
	printToolchains(&stdout, []toolchain.Entry{{Name: "x\x1b[31m", Missing: "y\x1b[2J"}})
	writeNotes(&stderr, []string{"toolchain tool: " + evil})
	for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s holds a control character: %q", name, out)
		}
	}
	for _, want := range []string{`#   tool: ` + root + `/e\x1b]0;owned\avil/bin/tool; binds`, `cordon run -- x\x1b[31m: not bound: y\x1b[2J`} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, want := range []string{`cordon: warning: ` + root + `/p\x1b[2J.yaml:3:20: toolchains[1]: nosuch: found nowhere`, `cordon: note: toolchain tool: ` + root + `/e\x1b]0;owned\avil`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
