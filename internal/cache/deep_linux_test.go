package cache

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/du"
)

// chain makes n directories d/d/d/... beneath dir (deeper than a path can
// name, as a sandbox makes them with mkdir d; cd d) and writes size bytes
// in the deepest.
func chain(t *testing.T, dir string, n, size int) {
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
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "big", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
}

// What a sandbox put deeper than a walk descends counts as past the
// caches' bound, and a trim clears it: it is not carried, unmeasured,
// from run to run.
func TestDeepTreesArePastTheBoundAndTrimmed(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(root, "a")
	kinds, _ := Expand([]string{"go", "npm"})
	if err := s.Prepare(kinds); err != nil {
		t.Fatal(err)
	}
	chain(t, filepath.Join(root, "a", "go", "build"), du.MaxDepth+10, 8<<20)
	write(t, filepath.Join(root, "a", "npm", "cache", "small"), 4096)
	u, err := s.Use(Bound(4 << 20))
	if err != nil || !u.Past {
		t.Fatalf("8 MiB deeper than a walk descends, against 4 MiB: %+v, %v; want past", u, err)
	}
	cleared, err := s.Trim(4 << 20)
	if err != nil || len(cleared) != 1 || cleared[0].Name != "go" {
		t.Fatalf("trim cleared %+v (%v); want go, which holds what was not measured", cleared, err)
	}
	if u, err := s.Use(Bound(4 << 20)); err != nil || u.Past {
		t.Fatalf("after the trim: %+v, %v", u, err)
	}
}

// A clear removes a tree however deep, with a bounded number of
// descriptors, and leaves nothing for the next one.
func TestClearRemovesTreesDeeperThanItDescends(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(root, "a")
	kinds, _ := Expand([]string{"go"})
	if err := s.Prepare(kinds); err != nil {
		t.Fatal(err)
	}
	chain(t, filepath.Join(root, "a", "go", "build"), 5000, 1<<20)
	if _, err := s.Clear(nil); err != nil {
		t.Fatalf("clear: %.300v", err)
	}
	left, _ := os.ReadDir(filepath.Join(root, "a"))
	for _, e := range left {
		if e.Name() == "go" || strings.HasPrefix(e.Name(), leftoverPrefix) {
			t.Fatalf("left after the clear: %s", e.Name())
		}
	}
}

// Deep and wide, with links to outside beneath where a clear stops
// descending, and few descriptors to spend: the clear removes the tree,
// and nothing a link names.
func TestClearOfDeepTreesFollowsNothingAndSpendsFewDescriptors(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(root, "a")
	kinds, _ := Expand([]string{"go"})
	if err := s.Prepare(kinds); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(outside, "keep", "f"), 10)
	build := filepath.Join(root, "a", "go", "build")
	fd, err := unix.Open(build, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxRemoveDepth+3; i++ {
		for j := 0; j < 3; j++ {
			unix.Symlinkat(outside, fd, "link"+strconv.Itoa(j))
			unix.Mkdirat(fd, "w"+strconv.Itoa(j), 0o755)
			if j > 0 {
				unix.Fchmodat(fd, "w"+strconv.Itoa(j), 0, 0)
			}
		}
		unix.Mkdirat(fd, "d", 0o755)
		sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = sub
	}
	unix.Close(fd)
	// Directories an earlier clear moved up and left.
	os.MkdirAll(filepath.Join(root, "a", "go", movedPrefix+"0", "d"), 0o700)
	os.MkdirAll(filepath.Join(root, "a", leftoverPrefix+"go-x", movedPrefix+"0", "d"), 0o700)

	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	low := lim
	low.Cur = maxRemoveDepth + 64
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	_, err = s.Clear(nil)
	unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	if err != nil {
		t.Fatalf("clear: %.300v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep", "f")); err != nil {
		t.Fatalf("what a link named went too: %v", err)
	}
	left, _ := os.ReadDir(filepath.Join(root, "a"))
	for _, e := range left {
		if e.Name() == "go" || strings.HasPrefix(e.Name(), leftoverPrefix) {
			t.Fatalf("left after the clear: %s", e.Name())
		}
	}
}
