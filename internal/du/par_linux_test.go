package du

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A parallel walk counts what Walk counts, follows nothing, says what it
// did not see (too deep, closed to it), and leaves no descriptor open,
// whether it ends or stops past its bound, on a tree wider than the
// directories it holds open waiting.
func TestWalkParallelCountsAsWalkDoes(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o644)
	for i := range 3 * maxQueued {
		sub := filepath.Join(dir, "w"+strconv.Itoa(i), "x")
		os.MkdirAll(sub, 0o755)
		os.WriteFile(filepath.Join(sub, "f"), make([]byte, 4096*(i%5+1)), 0o644)
	}
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(outside, "big"), filepath.Join(dir, "w0", "link"))
	chain(t, dir, MaxDepth+3)
	if err := os.MkdirAll(filepath.Join(dir, "closed", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "closed"), 0) // root still enters it: Unseen only when not root

	fds := openFDs(t)
	want, err := Walk(open(t, dir), Bound{})
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 8} {
		got, err := WalkParallel(open(t, dir), workers, Bound{})
		if err != nil || got != want {
			t.Fatalf("%d workers: %+v, %v; Walk counted %+v", workers, got, err, want)
		}
	}
	if want.Unseen == 0 {
		t.Fatalf("walk: %+v; want what is too deep unseen", want)
	}
	bound := Bound{Inodes: 100}
	got, err := WalkParallel(open(t, dir), 2, bound)
	if err != nil || !got.Past || got.Inodes <= 100 || got.Inodes >= want.Inodes {
		t.Fatalf("bounded at 100 entries of %d: %+v, %v; want it past, and stopped", want.Inodes, got, err)
	}
	got, err = WalkParallel(open(t, dir), 2, Bound{Bytes: 64 << 10})
	if err != nil || !got.Past || got.Bytes <= 64<<10 {
		t.Fatalf("bounded at 64 KiB: %+v, %v", got, err)
	}
	os.Chmod(filepath.Join(dir, "closed"), 0o755)
	if n := openFDs(t); n != fds+6 { // the six open() of this test, closed at its end
		t.Fatalf("%d descriptors open after the walks, %d before: want only the test's own", n, fds)
	}
}

// A directory the sandbox removes while it waits in the queue (held
// open) was empty: the walk counts it as such, and goes on to find what
// is past its bound, rather than ending with the kernel's ENOENT.
func TestWalkParallelSkipsADirectoryRemovedWhileQueued(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "gone"), 0o755)
	os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1<<20), 0o644)
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := unix.Openat(root, "gone", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Rmdir(filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	// As dir leaves them: the removed directory queued ahead of the root.
	p := &par{bound: Bound{Bytes: 4096}, queue: make(chan queued, maxQueued)}
	p.pending.Add(2)
	p.queue <- queued{sub, 1}
	p.queue <- queued{root, 0}
	done := make(chan struct{})
	go func() { defer close(done); p.work() }()
	p.pending.Wait()
	close(p.queue)
	<-done
	if p.err != nil && !errors.Is(p.err, errPast) || !p.past() {
		t.Fatalf("walk ended with %v (past %v, %d bytes); want the removed directory skipped and the walk past its bound", p.err, p.past(), p.bytes.Load())
	}
}
