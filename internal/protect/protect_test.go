package protect

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func repo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{".git/hooks", ".git/info", ".git/modules/sub/hooks", "src"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, text := range map[string]string{
		".git/config":             "[core]\n\thooksPath = .husky/_\n",
		".git/HEAD":               "ref: refs/heads/main\n",
		".git/modules/sub/HEAD":   "ref: refs/heads/main\n",
		".git/modules/sub/config": "",
		".bashrc":                 "",
		"src/main.go":             "package main\n",
	} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func entries(p *Plan) map[string]bool {
	m := map[string]bool{}
	for _, e := range p.Entries {
		m[e.Rel] = e.ReadOnly
	}
	return m
}

func TestMake(t *testing.T) {
	root := repo(t)
	p, err := Make(root, Options{Extra: []string{"agent.approval.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	got := entries(p)
	for rel, ro := range map[string]bool{
		".git": false, ".git/hooks": true, ".git/config": true, ".git/info": false,
		".git/info/attributes": true, ".gitmodules": true, ".vscode": true, ".claude": true,
		".mcp.json": true, ".bashrc": true, ".husky": true,
		".git/modules": false, ".git/modules/sub": false, ".git/modules/sub/hooks": true, ".git/modules/sub/config": true,
		"agent.approval.yaml": true,
	} {
		if v, ok := got[rel]; !ok || v != ro {
			t.Errorf("%s: got (%v, present %v), want read-only %v", rel, v, ok, ro)
		}
	}
	if _, ok := got[".zshrc"]; ok {
		t.Errorf(".zshrc protected though absent: %v", got)
	}
	for i := 1; i < len(p.Entries); i++ {
		if strings.Count(p.Entries[i-1].Rel, "/") > strings.Count(p.Entries[i].Rel, "/") {
			t.Fatalf("not shallow first: %v", p.Entries)
		}
	}
	ghosts := p.Placeholders()
	for _, g := range []string{".vscode", ".mcp.json", ".gitmodules", ".husky", ".git/info/attributes", "agent.approval.yaml"} {
		if !slices.Contains(ghosts, g) {
			t.Errorf("no placeholder for %s: %v", g, ghosts)
		}
		if fi, err := os.Lstat(filepath.Join(root, g)); err != nil || !fi.IsDir() {
			t.Errorf("placeholder %s: %v", g, err)
		}
	}
	// Something put in a placeholder (from the host: inside, it is
	// read-only) stays, and so does its placeholder.
	if err := os.WriteFile(filepath.Join(root, ".vscode", "settings.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.Remove()
	for _, g := range ghosts {
		_, err := os.Lstat(filepath.Join(root, g))
		if g == ".vscode" {
			if err != nil {
				t.Errorf("a placeholder that is no longer empty was removed")
			}
		} else if err == nil {
			t.Errorf("placeholder %s left behind", g)
		}
	}
}

func TestMakeRefuses(t *testing.T) {
	root := repo(t)
	if err := os.Symlink("/etc", filepath.Join(root, ".vscode")); err != nil {
		t.Fatal(err)
	}
	if _, err := Make(root, Options{}); !errors.Is(err, ErrLink) {
		t.Errorf("a link at a protected path: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".claude")); err == nil {
		t.Errorf("placeholders left after a refusal")
	}
	os.Remove(filepath.Join(root, ".vscode"))

	if err := os.Rename(filepath.Join(root, ".git", "info"), filepath.Join(root, "info")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../info", filepath.Join(root, ".git", "info")); err != nil {
		t.Fatal(err)
	}
	if _, err := Make(root, Options{}); !errors.Is(err, ErrLink) {
		t.Errorf("a link on the way to a protected path: %v", err)
	}
	os.Remove(filepath.Join(root, ".git", "info"))

	if err := os.Link(filepath.Join(root, ".git", "config"), filepath.Join(root, "src", "config")); err != nil {
		t.Fatal(err)
	}
	if _, err := Make(root, Options{}); err == nil || !strings.Contains(err.Error(), "hard link") {
		t.Errorf("a protected file with another name: %v", err)
	}
}

func TestUnprotect(t *testing.T) {
	root := t.TempDir()
	p, err := Make(root, Options{Unprotect: []string{".git", ".vscode"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	got := entries(p)
	for _, rel := range []string{".git", ".git/hooks", ".git/config", ".vscode"} {
		if _, ok := got[rel]; ok {
			t.Errorf("%s protected though opened by name", rel)
		}
	}
	if _, ok := got[".claude"]; !ok {
		t.Errorf(".claude not protected: %v", got)
	}
}

// Two sandboxes on one workspace: the first to end leaves the placeholder
// the other still protects.
func TestPlaceholderShared(t *testing.T) {
	root := t.TempDir()
	a, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Remove()
	if _, err := os.Lstat(filepath.Join(root, ".vscode")); err != nil {
		t.Fatalf("removed while another sandbox protects it: %v", err)
	}
	b.Remove()
}

func TestSensitive(t *testing.T) {
	root := t.TempDir()
	if why := Sensitive(root); why != "" {
		t.Fatalf("a fresh directory: %s", why)
	}
	if err := os.Mkdir(filepath.Join(root, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if why := Sensitive(root); !strings.Contains(why, ".ssh") {
		t.Fatalf("a directory holding .ssh: %q", why)
	}
	home, err := os.UserHomeDir()
	if err == nil && home != "/" {
		if why := Sensitive(home); !strings.Contains(why, "home directory") {
			t.Errorf("the home directory: %q", why)
		}
	}
}

// .git/commondir, which git reads as a file, is held by a file naming the
// git directory itself (with which git works as ever), and goes with the
// other placeholders; one whose content changed is left.
func TestCommondir(t *testing.T) {
	root := repo(t)
	p, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commondir := filepath.Join(root, ".git", "commondir")
	if b, err := os.ReadFile(commondir); err != nil || string(b) != ".\n" {
		t.Fatalf("commondir placeholder: %q %v", b, err)
	}
	if ro, ok := entries(p)[".git/commondir"]; !ok || !ro {
		t.Fatalf("commondir not protected: %v", entries(p))
	}
	p.Remove()
	if _, err := os.Lstat(commondir); err == nil {
		t.Fatal("the commondir placeholder was left")
	}
	p, err = Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(commondir, []byte("../elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Remove()
	if b, _ := os.ReadFile(commondir); string(b) != "../elsewhere\n" {
		t.Fatalf("a commondir that is no longer cordon's was removed: %q", b)
	}
}

// A later cordon's sweep removes the placeholders from their tokens alone
// (see package journal), as Remove would.
func TestSweep(t *testing.T) {
	root := repo(t)
	p, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tokens := p.Tokens()
	if len(tokens) == 0 {
		t.Fatal("no tokens")
	}
	for _, f := range p.held {
		f.Close() // as when cordon dies
	}
	p.held = nil
	Sweep(tokens)
	for _, g := range p.Placeholders() {
		if _, err := os.Lstat(filepath.Join(root, g)); err == nil {
			t.Errorf("placeholder %s left after Sweep", g)
		}
	}
}

// A submodule's .git file (which names its repository) is held read-only;
// the directories on its way are pinned.
func TestSubmoduleGitfile(t *testing.T) {
	root := repo(t)
	if err := os.MkdirAll(filepath.Join(root, "vendor", "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, ".gitmodules"), []byte("[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = ../lib\n[submodule \"bad\"]\n\tpath = ../outside\n"), 0o644)
	os.WriteFile(filepath.Join(root, "vendor", "lib", ".git"), []byte("gitdir: ../../.git/modules/lib\n"), 0o644)
	p, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	got := entries(p)
	for rel, ro := range map[string]bool{"vendor": false, "vendor/lib": false, "vendor/lib/.git": true} {
		if v, ok := got[rel]; !ok || v != ro {
			t.Errorf("%s: (%v, present %v), want read-only %v", rel, v, ok, ro)
		}
	}
	for rel := range got {
		if strings.Contains(rel, "outside") {
			t.Errorf("a path outside the bind: %s", rel)
		}
	}
}

// What git obeys is found wherever git would look: submodules named with a
// slash, declared but not made yet, linked worktrees, a .git file naming a
// git directory in the bind, a per-worktree configuration the extension
// turns on, a hooks path written on the section's line with a comment.
func TestGitLayouts(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git", "gitdir: .bare\n")
	write(".bare/HEAD", "ref: refs/heads/main\n")
	write(".bare/config", "[core] hooksPath = .husky/_ ; set by husky\n[extensions]\n\tworktreeConfig = true\n")
	write(".bare/modules/vendor/lib/HEAD", "ref: refs/heads/main\n")
	write(".bare/modules/vendor/lib/config", "")
	write(".bare/worktrees/wt/commondir", "../..\n")
	write(".bare/worktrees/wt/gitdir", "/elsewhere/wt/.git\n")
	write(".gitmodules", "[submodule \"vendor/lib\"]\n\tpath = vendor/lib\n[submodule \"later\"]\n\tpath = later\n")
	p, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	got := entries(p)
	for rel, ro := range map[string]bool{
		".git": true, ".bare": false, ".bare/hooks": true, ".bare/config": true, ".bare/commondir": true,
		".bare/config.worktree": true, ".bare/modules": false, ".bare/modules/vendor/lib": false,
		".bare/modules/vendor/lib/config": true, ".bare/modules/vendor/lib/hooks": true,
		".bare/modules/later": true, ".bare/worktrees/wt/commondir": true, ".bare/worktrees/wt/gitdir": true,
		".husky": true, "later": true,
	} {
		if v, ok := got[rel]; !ok || v != ro {
			t.Errorf("%s: (%v, present %v), want read-only %v", rel, v, ok, ro)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, ".bare", "config.worktree")); err != nil || len(b) != 0 {
		t.Errorf("config.worktree placeholder: %q %v", b, err)
	}
}

// What a sandbox leaves under .git/modules, or names in .gitmodules, is
// bounded: too many repositories, or too deep, is refused (quickly, with
// the names it chose escaped), and a declared name that leaves .git/modules
// is not followed.
func TestGitBounds(t *testing.T) {
	many := repo(t)
	for i := range maxGitDirs + 1 {
		dir := filepath.Join(many, ".git", "modules", fmt.Sprintf("m\x1b[2J%d", i))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	}
	if _, err := Make(many, Options{}); !errors.Is(err, errTooManyGits) || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("too many repositories: %v", err)
	}
	deep := repo(t)
	os.MkdirAll(filepath.Join(deep, ".git", "modules", strings.Repeat("d/", maxGitDepth+1)), 0o755)
	if _, err := Make(deep, Options{}); !errors.Is(err, errTooManyGits) {
		t.Errorf("too deep: %v", err)
	}
	out := repo(t)
	os.WriteFile(filepath.Join(out, ".gitmodules"), []byte("[submodule \"../../../etc\"]\n\tpath = ../outside\n"), 0o644)
	p, err := Make(out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	for rel := range entries(p) {
		if strings.Contains(rel, "etc") || strings.Contains(rel, "outside") {
			t.Errorf("followed a name out of the bind: %s", rel)
		}
	}
}

// A home reached through a link is known by its real path too: paths
// found by following links name it that way.
func TestHomesThroughLink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "realhome")
	link := filepath.Join(dir, "hl")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", link)
	realReal, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	homes := Homes()
	if !slices.Contains(homes, link) || !slices.Contains(homes, realReal) {
		t.Errorf("HOME=%s -> %s: homes %v", link, realReal, homes)
	}
	if why := Sensitive(realReal); !strings.Contains(why, "home directory") {
		t.Errorf("the linked home's real path: %q", why)
	}
}

func TestProtected(t *testing.T) {
	for rel, want := range map[string]bool{
		".git":                     true,
		".git/hooks/pre-commit":    true,
		"sub/.git/config":          true,
		"a/.vscode/settings.json":  true,
		".bashrc":                  true,
		"home/.zshrc":              true,
		".husky/pre-commit":        true,
		".github/workflows/ci.yml": true,
		"x/.github/workflows":      true,
		".github/CODEOWNERS":       false,
		"src/main.go":              false,
		"git/hooks":                false,
		".gitignore":               false,
		"docs/.bashrc.md":          false,
		"lefthook.yml":             true,
		"workflows/.github":        false,
	} {
		if got := Protected(rel); got != want {
			t.Errorf("Protected(%q) = %v, want %v", rel, got, want)
		}
	}
}
