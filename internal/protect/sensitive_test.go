package protect

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EvalSymlinks answers as filepath.EvalSymlinks does, for paths that exist,
// do not, or lead through links that do or do not.
func TestEvalSymlinksAsFilepath(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "home", ".ssh"), 0o700))
	must(os.Symlink("home", filepath.Join(dir, "link")))
	must(os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	must(os.Symlink("loop", filepath.Join(dir, "loop")))
	must(os.WriteFile(filepath.Join(dir, "file"), nil, 0o600))
	// A chain of more links than the kernel follows in one lookup (40),
	// fewer than filepath.EvalSymlinks does (255): lstat fails (ELOOP)
	// where the walk finds the home.
	prev := "home"
	for i := range 50 {
		name := fmt.Sprintf("chain%d", i)
		must(os.Symlink(prev, filepath.Join(dir, name)))
		prev = name
	}
	for _, p := range []string{
		"home", "home/.ssh", "home/.aws", "link", "link/.ssh", "link/.aws",
		"dangling", "dangling/.ssh", prev, prev + "/.ssh", prev + "/.aws", "loop", "loop/.ssh", "file/.ssh", "missing/.ssh",
	} {
		p = filepath.Join(dir, p)
		want, werr := filepath.EvalSymlinks(p)
		got, gerr := EvalSymlinks(p)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Errorf("EvalSymlinks(%s) = %q, %v; filepath.EvalSymlinks: %q, %v", p, got, gerr, want, werr)
		}
	}
}
