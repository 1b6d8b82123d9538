package changes

// Attacks on landing from a layer that stays in use, as cordon serve's
// guarded sandboxes land after each command (Limits.Landed, Remember):
// what the host changed since a landing is never taken for cordon's own
// landing, and what the sandbox changed is never taken for unchanged.

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// serveLander captures and lands the layer of e as cordon serve does after
// each command, remembering what landed.
type serveLander struct {
	t      *testing.T
	e      *env
	layer  *os.File
	landed map[string]Landed
}

func newServeLander(t *testing.T) *serveLander {
	e := newEnv(t)
	e.start()
	layer, err := os.Open(e.layer)
	must(t, err)
	t.Cleanup(func() { layer.Close() })
	return &serveLander{t: t, e: e, layer: layer, landed: map[string]Landed{}}
}

func (a *serveLander) land() (*Set, *Report) {
	a.t.Helper()
	Discard(a.e.state, testRun)
	s, err := Capture(a.layer, a.e.host, a.e.state, testRun, a.e.started, Limits{Landed: a.landed})
	must(a.t, err)
	rep, _, err := Land(s, a.layer, a.e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(a.t, err)
	a.landed = Remember(s, rep, a.landed)
	return s, rep
}

func ctimeOf(t *testing.T, p string) int64 {
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return st.Ctim.Nano()
}

// The skip of a file as it landed on both sides compares the layer's
// inode too: another file of the layer with the same change time (made in
// the same clock tick), moved to the path with its directory, is not taken
// for the one that landed.
func TestServeLandingSkipSeesInode(t *testing.T) {
	a := newServeLander(t)
	var same bool
	for i := 0; i < 50 && !same; i++ {
		os.RemoveAll(filepath.Join(a.e.upper, "p"))
		os.RemoveAll(filepath.Join(a.e.upper, "q"))
		must(t, os.Mkdir(filepath.Join(a.e.upper, "p"), 0o755))
		must(t, os.Mkdir(filepath.Join(a.e.upper, "q"), 0o755))
		// As sh -c 'mkdir p q; echo AAAA > p/x; echo BBBB > q/x' does.
		must(t, os.WriteFile(filepath.Join(a.e.upper, "p/x"), []byte("AAAA\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(a.e.upper, "q/x"), []byte("BBBB\n"), 0o644))
		same = ctimeOf(t, filepath.Join(a.e.upper, "p/x")) == ctimeOf(t, filepath.Join(a.e.upper, "q/x"))
	}
	if !same {
		t.Skip("could not make two files in one clock tick")
	}
	a.land()
	// The next command: mv p p2; mv q p (both directories are the
	// layer's own, which overlayfs renames within the upper layer).
	must(t, os.Rename(filepath.Join(a.e.upper, "p"), filepath.Join(a.e.upper, "p2")))
	must(t, os.Rename(filepath.Join(a.e.upper, "q"), filepath.Join(a.e.upper, "p")))
	mknodWhiteout(t, filepath.Join(a.e.upper, "q"))
	a.land()
	b, _ := os.ReadFile(filepath.Join(a.e.host, "p/x"))
	if string(b) != "BBBB\n" {
		t.Fatalf("the layer's p/x is BBBB, the host's is %q: the change was skipped as \"as it landed\" and never lands", b)
	}
}

func mknodWhiteout(t *testing.T, p string) {
	must(t, unix.Mknod(p, unix.S_IFCHR, 0))
}

// A host path deleted after it landed is a host change since it landed: a
// conflict that waits, landing after landing, and never makes the path
// again unasked.
func TestServeLandingHostDeletionWaits(t *testing.T) {
	a := newServeLander(t)
	write(t, filepath.Join(a.e.upper, "f"), "the sandbox's\n", 0o644)
	a.land()
	must(t, os.Remove(filepath.Join(a.e.host, "f"))) // the user deletes it
	for i := 0; i < 2; i++ {                         // after any later command
		s, rep := a.land()
		if _, err := os.Lstat(filepath.Join(a.e.host, "f")); err == nil {
			t.Fatalf("landing %d: the host's deletion of f was undone: changes %+v, report %+v", i, s.Changes, rep)
		}
		if len(s.Changes) != 1 || !s.Changes[0].Has(FlagConflict) || len(rep.Conflicts) != 1 {
			t.Fatalf("landing %d: f is not a conflict that waits: changes %+v, report %+v", i, s.Changes, rep)
		}
	}
}

// What the host writes to a path after cordon landed it, but before
// Remember looks at it (for a large landing: while the rest of the set
// lands), is the host's: the sandbox's next version waits as a conflict.
func TestServeLandingHostEditDuringLanding(t *testing.T) {
	a := newServeLander(t)
	write(t, filepath.Join(a.e.upper, "f"), "v1\n", 0o644)
	Discard(a.e.state, testRun)
	s, err := Capture(a.layer, a.e.host, a.e.state, testRun, a.e.started, Limits{Landed: a.landed})
	must(t, err)
	rep, _, err := Land(s, a.layer, a.e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(t, err)
	// The user saves f while the rest of a large set still lands.
	write(t, filepath.Join(a.e.host, "f"), "v1\nthe user's edit\n", 0o644)
	a.landed = Remember(s, rep, a.landed)
	write(t, filepath.Join(a.e.upper, "f"), "v2\n", 0o644) // the next command
	a.land()
	if b, _ := os.ReadFile(filepath.Join(a.e.host, "f")); string(b) == "v2\n" {
		t.Fatalf("the user's edit of f was replaced by the sandbox's v2 without a conflict")
	}
}
