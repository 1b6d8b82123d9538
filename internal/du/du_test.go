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

// chain makes n directories d/d/d/... beneath dir, one beneath the other
// (deeper than a path can name: each is made beneath its parent's
// descriptor), and returns a descriptor of the deepest.
func chain(t *testing.T, dir string, n int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = sub
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// What a walk does not enter, deeper than MaxDepth, it says it did not
// see: a sandbox hides nothing from a bound there.
func TestWalkSaysWhatItDidNotSee(t *testing.T) {
	dir := t.TempDir()
	deep := chain(t, dir, MaxDepth+5)
	f, err := unix.Openat(deep, "big", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, make([]byte, 1<<20))
	unix.Close(f)
	u, err := Walk(open(t, dir), Bound{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Unseen == 0 {
		t.Fatalf("a tree deeper than %d directories: %+v; want it to say it did not see all of it", MaxDepth, u)
	}
	shallow := t.TempDir()
	chain(t, shallow, 3)
	if u, err := Walk(open(t, shallow), Bound{}); err != nil || u.Unseen != 0 || u.Inodes != 3 {
		t.Fatalf("3 directories: %+v, %v", u, err)
	}
}
