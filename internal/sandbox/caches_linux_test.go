package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/cache"
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
	c := w.end()
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
