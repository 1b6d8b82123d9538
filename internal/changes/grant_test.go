package changes

import (
	"os"
	"path/filepath"
	"testing"
)

// Without privilege, capture opens up what the sandbox made unreadable to
// its owner, and keeps the modes it had.
func TestGrant(t *testing.T) {
	up := t.TempDir()
	if err := os.MkdirAll(filepath.Join(up, "closed"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(up, "closed", "inner"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(up, "secret"), []byte("y"), 0o644)
	os.Chmod(filepath.Join(up, "secret"), 0)
	os.Chmod(filepath.Join(up, "closed"), 0)
	defer os.Chmod(filepath.Join(up, "closed"), 0o755)
	d, err := os.Open(up)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	modes := map[uint64]uint32{}
	budget := 10
	if err := grant(d, 0, &budget, modes); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"secret", "closed", "closed/inner"} {
		fi, err := os.Stat(filepath.Join(up, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o400 == 0 {
			t.Errorf("%s: still unreadable (%v)", p, fi.Mode())
		}
	}
	if len(modes) != 2 {
		t.Errorf("modes kept: %v, want the two entries opened up", modes)
	}
	for _, m := range modes {
		if m != 0 {
			t.Errorf("kept mode %o, want 0", m)
		}
	}
	d2, err := os.Open(up)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	budget = 1
	if err := grant(d2, 0, &budget, modes); err == nil {
		t.Error("the entry budget did not hold")
	}
}

// An entry swapped for a link to a file outside, between the look and the
// change (a live layer can do that), leaves the outside file as it was:
// what is changed is the entry that was looked at.
func TestGrantSwappedLink(t *testing.T) {
	up, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	must(t, os.WriteFile(victim, []byte("v"), 0o644))
	must(t, os.Chmod(victim, 0))
	must(t, os.WriteFile(filepath.Join(up, "entry"), []byte("x"), 0o644))
	must(t, os.Chmod(filepath.Join(up, "entry"), 0))
	swapHook = func(d *os.File, name string) {
		must(t, os.Rename(filepath.Join(up, name), filepath.Join(outside, "moved")))
		must(t, os.Symlink(victim, filepath.Join(up, name)))
	}
	defer func() { swapHook = nil }()
	d, err := os.Open(up)
	must(t, err)
	defer d.Close()
	budget := 10
	must(t, grant(d, 0, &budget, map[uint64]uint32{}))
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("the file outside changed: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(outside, "moved")); err != nil || fi.Mode().Perm()&0o400 == 0 {
		t.Errorf("the entry looked at was not opened up: %v %v", fi.Mode(), err)
	}
}
