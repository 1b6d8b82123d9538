package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cache"
	"github.com/cordon-sandbox/cordon/internal/du"
)

// watchOf is the watch of an agent's go cache under a temporary root,
// bounded by size, as addCaches makes it.
func watchOf(t *testing.T, size int64) (*cacheWatch, string) {
	t.Helper()
	root := t.TempDir()
	store, err := cache.Open(root, "a")
	if err != nil {
		t.Fatal(err)
	}
	kinds, _ := cache.Expand([]string{"go"})
	if err := store.Prepare(kinds); err != nil {
		t.Fatal(err)
	}
	plan := &cache.Plan{Store: store, Kinds: kinds, Size: size}
	w := &cacheWatch{plan: plan, bound: cache.Bound(size)}
	w.free = freeOn(store.Dir)
	return w, root
}

// Room freed elsewhere on the caches' file system (the sandbox's own
// workspace) hides what the caches gained from the file system's loss:
// what the run leaves is walked when it ends, and trimmed when past.
func TestCachesAreWalkedWhenTheRunEnds(t *testing.T) {
	w, root := watchOf(t, 8<<20)
	if u, known, err := w.check(true); err != nil || !known || u.Past {
		t.Fatalf("the run begins: %+v %v %v", u, known, err)
	}
	junk := filepath.Join(root, "junk")
	if err := os.WriteFile(junk, make([]byte, 32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if u, _, err := w.check(true); err != nil || u.Past {
		t.Fatalf("32 MiB written outside the caches: %+v, %v", u, err)
	}
	os.Remove(junk)
	if err := os.WriteFile(filepath.Join(root, "a", "go", "build", "big"), make([]byte, 32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// The file system's loss alone is fooled; what the run wrote is not.
	w.mu.Lock()
	_, fooled := w.unchanged(freeOn(w.plan.Store.Dir), 0)
	w.mu.Unlock()
	if !fooled {
		t.Log("the file system lost room meanwhile (another writer): the trick was not shown")
	}
	c := w.end(32 << 20)
	if !c.Past || !slices.Contains(c.Cleared, "go") {
		t.Fatalf("32 MiB in caches bounded by 8 MiB when the run ended: %+v; want past, and go cleared", c)
	}
}

// What other writers on the caches' file system took is no reason to end
// the run: far past the bound, the caches are walked at once, not taken
// to be past it.
func TestOthersLossIsWalkedNotTripped(t *testing.T) {
	w, _ := watchOf(t, 8<<20)
	if _, _, err := w.check(true); err != nil {
		t.Fatal(err)
	}
	now := freeOn(w.plan.Store.Dir)
	w.free = &[3]uint64{now[0] + (4<<30)/now[1], now[1], now[2]}
	u, known, err := w.check(false)
	if err != nil || !known || u.Past {
		t.Fatalf("4 GiB lost to another writer, the caches empty: %+v %v %v; want them walked, within", u, known, err)
	}
}

// A run that wrote nothing, and after which the caches' file system has
// the room it had, is not walked: the caches hold what they held before,
// at most, plus what the file system lost. Room taken without writing
// (fallocate) shows as a loss, and is walked.
func TestCachesNotWalkedAfterARunThatWroteNothing(t *testing.T) {
	w, root := watchOf(t, 64<<20)
	if err := w.plan.Store.Record(du.Use{Bytes: 4096, Inodes: 3}); err != nil {
		t.Fatal(err)
	}
	w.recorded, w.recordedOK = w.plan.Store.Recorded()
	// A file the walk would count, made without a loss the slack misses.
	if err := os.WriteFile(filepath.Join(root, "a", "go", "build", "small"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := w.end(0)
	if !c.Estimated || c.Bytes < 4096 || c.Files < 3 || c.Bytes > 4096+endSlack || c.Past || c.Error != "" {
		t.Fatalf("a run that wrote nothing: %+v; want estimated from the record", c)
	}
	if u, _ := w.plan.Store.Recorded(); u.Bytes != c.Bytes || u.Inodes != c.Files {
		t.Fatalf("recorded %+v after %+v", u, c)
	}

	// 16 MiB taken by fallocate, in caches bounded by 8 MiB.
	w, root = watchOf(t, 8<<20)
	w.plan.Store.Record(du.Use{})
	w.recorded, w.recordedOK = w.plan.Store.Recorded()
	f, err := os.Create(filepath.Join(root, "a", "go", "build", "taken"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 16<<20); err != nil {
		t.Skipf("fallocate: %v", err)
	}
	if c := w.end(0); c.Estimated || !c.Past || !slices.Contains(c.Cleared, "go") {
		t.Fatalf("16 MiB taken without writing: %+v; want walked, past, go cleared", c)
	}
}
