package layers

import (
	"os"
	"path/filepath"
	"testing"
)

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// A layer is made locked, refused twice, and released with its lock; a
// sweep removes what no process holds (a layer whose lock is free, a
// directory without one) and leaves a held layer alone.
func TestMakeSweepRelease(t *testing.T) {
	dir := t.TempDir()
	l, err := Make(dir, "run-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !exists(l.Dir) || !exists(l.Dir+lockSuffix) {
		t.Fatal("the layer or its lock is missing")
	}
	if _, err := Make(dir, "run-1", nil); err == nil {
		t.Fatal("a second layer of one name was made")
	}
	for _, bad := range []string{"", ".", "..", "a/b", "x.lock"} {
		if _, err := Make(dir, bad, nil); err == nil {
			t.Errorf("a layer named %q was made", bad)
		}
	}
	// What a killed cordon leaves: a layer with a lock nobody holds, and
	// one made before its lock was.
	left := filepath.Join(dir, "left")
	if err := os.MkdirAll(filepath.Join(left, "upper", "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(left+lockSuffix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "bare")
	if err := os.MkdirAll(filepath.Join(bare, "upper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(left, "upper", "d"), 0); err != nil {
		t.Fatal(err)
	}
	Sweep(dir)
	if exists(left) || exists(left+lockSuffix) || exists(bare) {
		t.Fatal("the sweep left what no process holds")
	}
	if !exists(l.Dir) || !exists(l.Dir+lockSuffix) {
		t.Fatal("the sweep removed a layer that is held")
	}
	l.Release()
	if exists(l.Dir) || exists(l.Dir+lockSuffix) {
		t.Fatal("a released layer is still there")
	}
	l.Release() // twice is nothing
	var none *Layer
	none.Release()
}

// A layer whose lock file was taken away between its making and its lock
// (a sweep that took the free lock) is refused: it would live unlocked.
func TestLockTakenAway(t *testing.T) {
	dir := t.TempDir()
	l := &Layer{Dir: filepath.Join(dir, "x")}
	f, err := os.OpenFile(l.Dir+lockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Remove(l.Dir + lockSuffix)
	if sameFile(f, l.Dir+lockSuffix) {
		t.Fatal("a removed lock file is taken for the one its name holds")
	}
	if err := os.WriteFile(l.Dir+lockSuffix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if sameFile(f, l.Dir+lockSuffix) {
		t.Fatal("another file under the lock's name is taken for the lock")
	}
}
