package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// The operations on names, as they run inside a sandbox: stat describes
// without following a link, remove takes a tree only when asked and never
// one that holds a placeholder, rename and mkdir do what they say, and a
// placeholder is no entry for any of them.
func TestFileOp(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o640)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "tree", "sub", "f"), nil, 0o600)
	os.MkdirAll(filepath.Join(dir, "guarded", "x"), 0o755)
	os.WriteFile(filepath.Join(dir, "guarded", "x", ".envrc"), nil, 0o600)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "guarded", "x", ".envrc"), &st); err != nil {
		t.Fatal(err)
	}
	hidden := map[protect.ID]bool{{Dev: st.Dev, Ino: st.Ino}: true}
	op := func(op, p string, args ...string) ([]byte, error) {
		var out bytes.Buffer
		err := fileOp(op, p, args, hidden, &out)
		return out.Bytes(), err
	}

	out, err := op("stat", filepath.Join(dir, "a.txt"))
	var e api.DirEntry
	if err != nil || json.Unmarshal(out, &e) != nil || e.Name != "a.txt" || e.Type != "file" || e.Size != 5 || e.Mode != "0640" {
		t.Errorf("stat a.txt: %s %v", out, err)
	}
	if out, err := op("stat", filepath.Join(dir, "link")); err != nil || json.Unmarshal(out, &e) != nil || e.Type != "symlink" || e.Target != "/etc/passwd" {
		t.Errorf("stat link: %s %v", out, err)
	}
	if out, err := op("stat", "/"); err != nil || json.Unmarshal(out, &e) != nil || e.Type != "dir" {
		t.Errorf("stat /: %s %v", out, err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "guarded", "x", ".envrc")} {
		if _, err := op("stat", p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat %s: %v, want not found", p, err)
		}
	}

	if out, err := op("mkdir", filepath.Join(dir, "m", "n")); err != nil || string(out) != "{\"created\":true}\n" {
		t.Errorf("mkdir: %q %v", out, err)
	}
	if out, err := op("mkdir", filepath.Join(dir, "m", "n")); err != nil || string(out) != "{\"created\":false}\n" {
		t.Errorf("mkdir again: %q %v", out, err)
	}
	if _, err := op("rename", filepath.Join(dir, "a.txt"), filepath.Join(dir, "m", "b.txt")); err != nil {
		t.Errorf("rename: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "m", "b.txt")); err != nil || string(b) != "hello" {
		t.Errorf("renamed: %q %v", b, err)
	}
	if _, err := op("rename", filepath.Join(dir, "m", "b.txt"), filepath.Join(dir, "guarded", "x", ".envrc")); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("rename onto a placeholder: %v", err)
	}
	if _, err := op("rename", filepath.Join(dir, "m", "b.txt"), "relative"); err == nil {
		t.Error("rename to a relative path was done")
	}

	if _, err := op("remove", filepath.Join(dir, "tree")); err == nil {
		t.Error("a tree was removed without recursive")
	}
	if _, err := op("remove", filepath.Join(dir, "tree"), "recursive"); err != nil {
		t.Errorf("remove recursive: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "tree")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tree still there: %v", err)
	}
	if _, err := op("remove", filepath.Join(dir, "guarded"), "recursive"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("remove a tree holding a placeholder: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "guarded", "x", ".envrc")); err != nil {
		t.Errorf("the placeholder is gone: %v", err)
	}
	// A link is removed, not what it names.
	if _, err := op("remove", filepath.Join(dir, "link")); err != nil {
		t.Errorf("remove link: %v", err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if _, err := op("remove", filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("remove missing: %v", err)
	}
}
