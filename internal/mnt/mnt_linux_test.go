package mnt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWalkNeverFollowsSymlinks(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	os.Symlink("/etc", filepath.Join(root, "a/link"))
	os.Symlink("b", filepath.Join(root, "a/rel"))
	rf, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()

	for _, p := range []string{"a/link", "a/link/passwd", "a/rel", "a/rel/x"} {
		if f, err := Walk(rf, p, func(*os.File) bool { return true }); err == nil {
			f.Close()
			t.Errorf("Walk(%s) followed a symlink", p)
		} else if !errors.Is(err, ErrSymlink) {
			t.Errorf("Walk(%s): got %v, want ErrSymlink", p, err)
		}
	}
	// ".." cannot climb out.
	f, err := Walk(rf, "../../../etc", nil)
	if err == nil {
		f.Close()
	}
	if _, statErr := os.Stat(filepath.Join(root, "etc")); err == nil && statErr != nil {
		t.Errorf("Walk(../../../etc) reached outside the root")
	}
	f, err = Walk(rf, "a/b", nil)
	if err != nil {
		t.Fatalf("Walk(a/b): %v", err)
	}
	f.Close()
}

func TestWalkCreatesOnlyWhereAllowed(t *testing.T) {
	root := t.TempDir()
	rf, _ := os.Open(root)
	defer rf.Close()
	if _, err := Walk(rf, "x/y", func(*os.File) bool { return false }); !errors.Is(err, unix.ENOENT) {
		t.Errorf("got %v, want ENOENT when creation is refused", err)
	}
	if _, err := os.Stat(filepath.Join(root, "x")); err == nil {
		t.Error("created a directory where not allowed")
	}
	f, err := Walk(rf, "x/y", func(*os.File) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(filepath.Join(root, "x/y")); err != nil || !fi.IsDir() {
		t.Errorf("x/y not created: %v", err)
	}
}

func TestOpenSources(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open_tree needs CAP_SYS_ADMIN")
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o755)
	os.Symlink("real", filepath.Join(dir, "link"))

	s, err := Open(filepath.Join(dir, "real"), unix.MOUNT_ATTR_RDONLY, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != Dir || s.Tree == nil {
		t.Errorf("got %+v", s)
	}
	s.Close()

	// A symlink as the last component is reproduced when allowed...
	s, err = Open(filepath.Join(dir, "link"), unix.MOUNT_ATTR_RDONLY, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != Symlink || s.Link != "real" || s.Tree != nil {
		t.Errorf("got %+v, want the symlink's text", s)
	}
	// ...refused otherwise, and never followed in the middle of a path.
	if _, err := Open(filepath.Join(dir, "link"), 0, false); !errors.Is(err, ErrSymlink) {
		t.Errorf("writable symlink source: got %v, want ErrSymlink", err)
	}
	if _, err := Open(filepath.Join(dir, "link", "sub"), 0, true); !errors.Is(err, ErrSymlink) {
		t.Errorf("symlink inside the path: got %v, want ErrSymlink", err)
	}
}
