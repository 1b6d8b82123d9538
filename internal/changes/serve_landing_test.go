package changes

// Attacks on landing from a layer that stays in use, as cordon serve's
// guarded sandboxes land after each command (Limits.Landed, Remember):
// what the host changed since a landing is never taken for cordon's own
// landing, and what the sandbox changed is never taken for unchanged.

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// A host path deleted after it landed is the host's change: while the
// sandbox leaves its copy as it was, it is no change of the sandbox's and
// never comes back; once the sandbox changes it, it is a conflict that
// waits, landing after landing.
func TestServeLandingHostDeletionWaits(t *testing.T) {
	a := newServeLander(t)
	write(t, filepath.Join(a.e.upper, "f"), "the sandbox's\n", 0o644)
	write(t, filepath.Join(a.e.upper, "d/g"), "g\n", 0o644)
	a.land()
	settle()
	must(t, os.Remove(filepath.Join(a.e.host, "f"))) // the user deletes them
	must(t, os.RemoveAll(filepath.Join(a.e.host, "d")))
	write(t, filepath.Join(a.e.upper, "other"), "x\n", 0o644) // any later command
	s, rep := a.land()
	if len(s.Changes) != 1 || s.Changes[0].Path != "other" {
		t.Fatalf("after the host's deletions: changes %+v, report %+v; want only other", s.Changes, rep)
	}
	for _, p := range []string{"f", "d"} {
		if _, err := os.Lstat(filepath.Join(a.e.host, p)); err == nil {
			t.Fatalf("the host's deletion of %s was undone", p)
		}
	}
	write(t, filepath.Join(a.e.upper, "f"), "the sandbox's, again\n", 0o644)
	for i := 0; i < 2; i++ {
		s, rep := a.land()
		if _, err := os.Lstat(filepath.Join(a.e.host, "f")); err == nil {
			t.Fatalf("landing %d: the host's deletion of f was undone: changes %+v, report %+v", i, s.Changes, rep)
		}
		if len(s.Changes) != 1 || !s.Changes[0].Has(FlagConflict) || len(rep.Conflicts) != 1 {
			t.Fatalf("landing %d: f is not a conflict that waits: changes %+v, report %+v", i, s.Changes, rep)
		}
	}
}

// settle waits past the time a change time is trusted alone (racyMargin).
func settle() { time.Sleep(racyMargin + 5*time.Millisecond) }

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

// A file the capture found equal on both sides is noted (sameAsHost). An
// editor that saves by writing a new file and renaming it over the old
// one, in the same clock tick as the old one's last change, leaves a path
// with another inode and another content but the same change time: the
// sandbox's next version of it waits as a conflict, the user's save stays.
func TestServeLandingHostSaveInSameTick(t *testing.T) {
	a := newServeLander(t)
	host, upper := filepath.Join(a.e.host, "f"), filepath.Join(a.e.upper, "f")
	hit := false
	for i := 0; i < 500 && !hit; i++ {
		a.landed = map[string]Landed{}
		write(t, upper, "A\n", 0o644)                                              // the sandbox touched f (copied up as it was)
		write(t, filepath.Join(a.e.upper, "other"), fmt.Sprintf("%d\n", i), 0o644) // the command wrote something else too
		write(t, host, "A\n", 0o644)                                               // the host's f, written just now
		a.land()                                                                   // f: same as the host's: noted
		write(t, host+".tmp", "B: the user's save\n", 0o644)                       // the user's editor saves f
		must(t, os.Rename(host+".tmp", host))                                      // by a rename
		k, ok := a.landed["f"]
		hit = ok && k.Host == ctimeOf(t, host)
	}
	if !hit {
		t.Skip("could not save within the clock tick of the capture")
	}
	write(t, upper, "C: the sandbox's\n", 0o644) // the next command
	s, rep := a.land()
	b, _ := os.ReadFile(host)
	if string(b) != "B: the user's save\n" {
		t.Fatalf("the user's save of f (another inode, same change time) was replaced by the sandbox's version without a conflict: host now %q; changes %+v; report %+v", b, s.Changes, rep)
	}
}

// A path that landed and that the host removed since (git gc packing the
// loose objects and refs the sandbox's commits landed) is the host's
// while the sandbox leaves it; once the sandbox writes it again (its next
// commit's ref), both changed it: a conflict that waits, and the host's
// state stays, whoever applies the set.
func TestServeLandingBothChangedWaits(t *testing.T) {
	a := newServeLander(t)
	ref := "build/out.txt"
	write(t, filepath.Join(a.e.upper, ref), "1111\n", 0o644)
	a.land()
	must(t, os.Remove(filepath.Join(a.e.host, ref)))         // git gc / git pack-refs on the host
	write(t, filepath.Join(a.e.upper, ref), "2222\n", 0o644) // the sandbox's next commit
	Discard(a.e.state, testRun)
	s, err := Capture(a.layer, a.e.host, a.e.state, testRun, a.e.started, Limits{Landed: a.landed})
	must(t, err)
	_, rest, err := Land(s, a.layer, a.e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(t, err)
	if len(rest.Changes) != 1 || !rest.Changes[0].Has(FlagConflict) {
		t.Fatalf("want the ref waiting as a conflict, got %+v", rest.Changes)
	}
	rep, err := Apply(rest, a.e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Applied) != 0 || len(rep.Conflicts) != 1 {
		t.Fatalf("an apply of the waiting conflict: %+v", rep)
	}
	if _, err := os.Lstat(filepath.Join(a.e.host, ref)); err == nil {
		t.Fatal("the host's removal was undone")
	}
}

// A file that landed and that the host edited since, which the sandbox
// has not touched again, is no change of the sandbox's: the layer's stale
// copy is not reported (it would undo the host's edit).
func TestServeLandingHostEditIsNoSandboxChange(t *testing.T) {
	a := newServeLander(t)
	write(t, filepath.Join(a.e.upper, "agent.py"), "print(1)\n", 0o644)
	a.land()
	write(t, filepath.Join(a.e.host, "agent.py"), "print(1)\n# the user's edit\n", 0o644)
	write(t, filepath.Join(a.e.upper, "other"), "x\n", 0o644) // any later command
	s, _ := a.land()
	for _, c := range s.Changes {
		if c.Path == "agent.py" {
			t.Fatalf("agent.py, untouched by the sandbox since it landed, is reported as the sandbox's change %+v (flags %v)", c.Kind, c.Flags)
		}
	}
}

// A directory that landed and that the host removed since stays removed:
// the next landing, after any command, does not make it again.
func TestServeLandingHostRemovedDirectoryStaysRemoved(t *testing.T) {
	a := newServeLander(t)
	must(t, os.Mkdir(filepath.Join(a.e.upper, "logs"), 0o755))
	a.land()
	must(t, os.Remove(filepath.Join(a.e.host, "logs"))) // the user's rmdir
	write(t, filepath.Join(a.e.upper, "other"), "x\n", 0o644)
	s, rep := a.land()
	if _, err := os.Lstat(filepath.Join(a.e.host, "logs")); err == nil {
		t.Fatalf("the user's removal of logs/ was undone by the next landing (changes %+v, applied %v, conflicts %v)", s.Changes, rep.Applied, rep.Conflicts)
	}
}
