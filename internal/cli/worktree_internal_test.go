package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkTreeTop finds a repository's top from below it, as git would,
// and never takes a home directory for one.
func TestWorkTreeTop(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	repo := mk("repo/.git")
	deep := mk("repo/a/b/c")
	linked := mk("linked/sub")
	if err := os.WriteFile(filepath.Join(root, "linked", ".git"), []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := mk("home/.git")
	inHome := mk("home/project/sub")
	homeRepo := mk("home/project2/.git")
	inHomeRepo := mk("home/project2/x")
	plain := mk("plain/x")
	mk("symlinked/x")
	if err := os.Symlink(repo, filepath.Join(root, "symlinked", ".git")); err != nil {
		t.Fatal(err)
	}
	homes := []string{filepath.Dir(home)}
	for _, c := range []struct {
		dir, top string
	}{
		{deep, filepath.Dir(repo)},
		{filepath.Dir(repo), filepath.Dir(repo)},
		{linked, filepath.Join(root, "linked")},
		// Never a home directory, nor above one.
		{inHome, ""},
		{filepath.Dir(home), ""},
		{inHomeRepo, filepath.Dir(homeRepo)},
		// A link named .git is not a repository's.
		{filepath.Join(root, "symlinked", "x"), ""},
		{plain, ""},
		{"relative", ""},
	} {
		top, ok := workTreeTop(c.dir, homes)
		if top != c.top || ok != (c.top != "") {
			t.Errorf("workTreeTop(%s) = %q, %t; want %q", c.dir, top, ok, c.top)
		}
	}
}
