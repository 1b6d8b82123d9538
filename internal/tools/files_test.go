package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A path resolves to the file the kernel would open: relative names,
// doubled slashes, "..", and symlinks (relative, absolute, chained, in a
// directory of the path, dangling) all give the canonical path and the
// file's identity; a new file is its parent's resolved path and name.
func TestResolve(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	must(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("K=V"), 0o600))
	must(t, os.Mkdir(filepath.Join(dir, "docs"), 0o755))
	must(t, os.Symlink("../.env", filepath.Join(dir, "docs", "config.txt")))
	must(t, os.Symlink(dir, filepath.Join(dir, "docs", "up")))
	must(t, os.Symlink("config.txt", filepath.Join(dir, "docs", "chain")))
	must(t, os.Symlink("../README.md", filepath.Join(dir, "docs", "dangling")))
	must(t, os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "hard")))
	t.Chdir(dir)
	env := filepath.Join(dir, ".env")
	for in, want := range map[string]string{
		".env":                 env,
		"./.env":               env,
		dir + "//.env":         env,
		"docs/../.env":         env,
		"docs/config.txt":      env,
		"docs/chain":           env,
		"docs/up/docs/up/.env": env,
		"docs/dangling":        filepath.Join(dir, "README.md"),
		"docs/new.md":          filepath.Join(dir, "docs", "new.md"),
	} {
		f, err := Resolve(in)
		if err != nil || f.Path != want {
			t.Errorf("%s: got %+v %v, want %s", in, f, err, want)
		}
	}
	f, _ := Resolve("docs/config.txt")
	h, _ := Resolve("hard")
	if !f.Exists || f.Ino == 0 || f.Ino != h.Ino || f.Dev != h.Dev || h.Links != 2 || h.Path == f.Path {
		t.Errorf("a hard link is the same file by another path: %+v %+v", f, h)
	}
	n, _ := Resolve("docs/new.md")
	d, _ := Resolve("docs")
	if n.Exists || n.Ino != d.Ino || !d.Dir {
		t.Errorf("a new file carries its parent's identity: %+v %+v", n, d)
	}
	must(t, os.Symlink("loop", filepath.Join(dir, "loop")))
	for _, bad := range []string{"loop", "missing/x", ".env/x", ""} {
		if f, err := Resolve(bad); err == nil {
			t.Errorf("%q resolved: %+v", bad, f)
		}
	}
}

// The tool opens exactly the decided file: a symlink put on its path or
// in its place since, another file under its name, or a file that took a
// new file's name are refused, and nothing is written.
func TestOpenDecided(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	t.Chdir(dir)
	must(t, os.WriteFile("README.md", []byte("readme"), 0o644))
	must(t, os.Mkdir("notes", 0o755))
	must(t, os.WriteFile("notes/a.md", []byte("a"), 0o644))
	decided, err := Resolve("notes/a.md")
	must(t, err)
	newf, err := Resolve("notes/evil-link")
	must(t, err)

	// As decided, it works.
	if r, err := run("read_file", Args{Path: decided.Path}, map[string]File{"path": decided}); err != nil || r.Content != "a" {
		t.Fatalf("decided read: %+v %v", r, err)
	}
	// The name now is a symlink to README.md: refused, README.md intact.
	must(t, os.Symlink(filepath.Join(dir, "README.md"), "notes/evil-link"))
	if _, err := run("write_file", Args{Path: newf.Path, Content: "pwned"}, map[string]File{"path": newf}); err == nil {
		t.Error("a symlink that took a new file's name was written through")
	}
	// Another file under the decided name (the first one kept, so that
	// its inode number is not reused).
	must(t, os.Rename("notes/a.md", "notes/a.old"))
	must(t, os.WriteFile("notes/a.md", []byte("other"), 0o644))
	if _, err := run("read_file", Args{Path: decided.Path}, map[string]File{"path": decided}); err == nil || !strings.Contains(err.Error(), "no longer the file") {
		t.Errorf("a replaced file was read: %v", err)
	}
	again, _ := Resolve("notes/a.md")
	// A directory of the path became a symlink.
	must(t, os.Rename("notes", "notes.old"))
	must(t, os.Symlink("notes.old", "notes"))
	if _, err := run("write_file", Args{Path: again.Path, Content: "pwned"}, map[string]File{"path": again}); err == nil {
		t.Error("written through a symlinked directory")
	}
	// The decided file itself replaced by a symlink.
	must(t, os.Remove("notes"))
	must(t, os.Rename("notes.old", "notes"))
	must(t, os.Remove("notes/a.md"))
	must(t, os.Symlink("../README.md", "notes/a.md"))
	if _, err := run("write_file", Args{Path: again.Path, Content: "pwned"}, map[string]File{"path": again}); err == nil {
		t.Error("written through a symlink in the decided file's place")
	}
	if b, _ := os.ReadFile("README.md"); string(b) != "readme" {
		t.Errorf("README.md changed: %q", b)
	}
}

// Main takes the decided files on its command line and holds the tool to
// them.
func TestMainDecided(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	t.Chdir(dir)
	must(t, os.WriteFile("a", []byte("a"), 0o644))
	must(t, os.WriteFile("b", []byte("b"), 0o644))
	fa, _ := Resolve("a")
	var out bytes.Buffer
	if code := Main("read_file", []string{ExpectArg("path", fa)}, strings.NewReader(`{"path":"`+filepath.Join(dir, "b")+`"}`), &out); code != 1 || !strings.Contains(out.String(), "no longer the file") {
		t.Errorf("read b for a decided a: %d %s", code, out.String())
	}
	out.Reset()
	if code := Main("read_file", []string{ExpectArg("path", fa)}, strings.NewReader(`{"path":"`+fa.Path+`"}`), &out); code != 0 || !strings.Contains(out.String(), `"content":"a"`) {
		t.Errorf("decided read: %d %s", code, out.String())
	}
	for _, bad := range []string{"path=1:2", "path=x:2:file", "=1:2:new", "url=1:2:file"} {
		out.Reset()
		if code := Main("read_file", []string{bad}, strings.NewReader(`{"path":"a"}`), &out); code != 2 {
			t.Errorf("%s: %d %s", bad, code, out.String())
		}
	}
}

func TestResolveMain(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	t.Chdir(dir)
	var out bytes.Buffer
	if code := ResolveMain(strings.NewReader(`{"paths":["x","a/b/c"]}`), &out); code != 0 || !strings.Contains(out.String(), `"workspace":"`+dir+`"`) || !strings.Contains(out.String(), `"error":"resolve `) {
		t.Errorf("%d %s", code, out.String())
	}
	out.Reset()
	if code := ResolveMain(strings.NewReader(`{"paths":["x"],"Paths":["y"]}`), &out); code != 2 {
		t.Errorf("case variant: %d %s", code, out.String())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A name to be made is one name only: in Unicode normal form C, and the
// NFC form of no entry there. A Kelvin sign, a decomposed accent, or a
// name another entry's NFC form equals is refused: a tool may take it for
// that entry.
func TestResolveOneName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cafe\u0301.txt"), []byte("decomposed"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"caf\u00e9.txt", false},      // the entry's NFC form
		{"\u212Aelvin.txt", false},    // not NFC: a Kelvin sign
		{"ne\u0301w.txt", false},      // not NFC: decomposed
		{"n\u00e9w.txt", true},        // NFC, and no entry's
		{"cafe\u0301.txt", true},      // the entry itself: it exists
		{"Passw\u00f6rter.txt", true}, // NFC
	} {
		f, err := Resolve(filepath.Join(dir, tc.name))
		if (err == nil) != tc.ok {
			t.Errorf("%q: %+v, %v; want ok %v", tc.name, f, err, tc.ok)
		}
	}
}
