package protect

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// A directory holding a store of credentials or a home directory at any
// depth is sensitive, and what was found is named relative to it; tools'
// configuration (.npmrc) and names that are not stores are not.
func TestSensitiveDeep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		home  string
		want  string
	}{
		{"top", []string{".ssh/id_rsa"}, "", " holds .ssh (SSH private keys"},
		{"one down", []string{"sub/.ssh/id_rsa", "sub/.bashrc"}, "", " holds sub/.ssh (SSH private keys"},
		{"three down", []string{"a/b/c/.aws/credentials"}, "", " holds a/b/c/.aws (AWS"},
		{"file", []string{"x/y/.git-credentials"}, "", " holds x/y/.git-credentials (git's"},
		{"in node_modules", []string{"node_modules/p/.docker/config.json"}, "", " holds node_modules/p/.docker/config.json"},
		{"several", []string{"a/.ssh/k", "b/.netrc", "c/.pgpass", "d/.kube/config"}, "", " and 1 more"},
		{"home", []string{"srv/u/notes"}, "srv/u", " holds the home directory srv/u"},
		{"project", []string{".npmrc", "src/.env", "lib/docker/credentials/x.py", ".config/app.json", "README"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.home != "" {
				t.Setenv("HOME", filepath.Join(dir, tc.home))
			}
			got := Sensitive(dir)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || (got != "" && !strings.HasPrefix(got, dir+" holds ")) {
				t.Errorf("Sensitive = %q, want %q", got, tc.want)
			}
		})
	}
}

// A link named as a store is judged by its name, and not followed.
func TestSensitiveLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(dir, "sub", ".aws")); err != nil {
		t.Fatal(err)
	}
	if got := Sensitive(dir); !strings.Contains(got, "holds sub/.aws") {
		t.Errorf("Sensitive = %q", got)
	}
}

// A directory too large or too deep to be searched whole is refused, and
// says so.
func TestSensitiveBounds(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b", "c", "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(dir, "a", fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Sensitive(dir); got != "" {
		t.Fatalf("Sensitive = %q", got)
	}
	defer func(e, d int) { sensitiveEntries, sensitiveDepth = e, d }(sensitiveEntries, sensitiveDepth)
	sensitiveEntries = 8
	if got := Sensitive(dir); !strings.Contains(got, "holds more than 8 files and directories: cordon stopped looking for credentials there") {
		t.Errorf("entries: Sensitive = %q", got)
	}
	sensitiveEntries, sensitiveDepth = 100, 3
	if got := Sensitive(dir); !strings.Contains(got, "is deeper than 3 directories (at a/b/c/d)") {
		t.Errorf("depth: Sensitive = %q", got)
	}
}
