package du

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func open(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestWalkCountsAndFollowsNothing(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o644)
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "b", "f"), make([]byte, 8192), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	u, err := Walk(open(t, dir), Bound{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Inodes != 4 || u.Bytes < 8192 || u.Bytes >= 1<<20 || u.Past {
		t.Fatalf("walk: %+v; want 4 entries (a, a/b, a/b/f, link), the link not followed", u)
	}
	u, err = Walk(open(t, dir), Bound{Inodes: 2})
	if err != nil || !u.Past || u.Inodes != 3 {
		t.Fatalf("bounded at 2 entries: %+v, %v; want it to stop at the third", u, err)
	}
}
