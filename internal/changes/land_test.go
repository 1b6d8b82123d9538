//go:build linux

package changes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// Land lands what the policy does not hold by moving the very file the
// sandbox wrote into place (its inode), stripped of set-id bits and
// extended attributes, and leaves the held changes, and only them, waiting
// under their own digest.
func TestLand(t *testing.T) {
	e := newEnv(t)
	write(t, filepath.Join(e.host, "keep.txt"), "old\n", 0o644)
	e.start()
	write(t, filepath.Join(e.upper, "keep.txt"), "new\n", 0o644)
	write(t, filepath.Join(e.upper, "src/main.go"), "package main\n", 0o755)
	write(t, filepath.Join(e.upper, "tool"), "#!/bin/sh\n", 0o4755)
	write(t, filepath.Join(e.upper, "same1"), "twin\n", 0o644)
	write(t, filepath.Join(e.upper, "same2"), "twin\n", 0o644)
	write(t, filepath.Join(e.upper, ".yarnrc.yml"), "yarnPath: ./y.cjs\n", 0o644)
	write(t, filepath.Join(e.upper, ".claude/settings.json"), "{}\n", 0o644)
	if err := unix.Setxattr(filepath.Join(e.upper, "src/main.go"), "user.mark", []byte("x"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	write(t, filepath.Join(e.upper, "nodump"), "flagged\n", 0o644)
	flagged := false
	if f, err := os.Open(filepath.Join(e.upper, "nodump")); err == nil {
		if fl, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS); err == nil {
			flagged = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(fl|nodumpFlag)) == nil
		}
		f.Close()
	}
	var before unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.upper, "src/main.go"), &before))

	s, layer := e.captureToLand(t)
	rep, rest, err := Land(s, layer, e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(t, err)
	if len(rep.Conflicts) > 0 {
		t.Fatalf("conflicts: %v", rep.Conflicts)
	}

	var after unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.host, "src/main.go"), &after))
	if after.Ino != before.Ino {
		t.Errorf("src/main.go was copied (inode %d, the sandbox's %d), not moved", after.Ino, before.Ino)
	}
	var tool unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.host, "tool"), &tool))
	if after.Mode&0o7777 != 0o755 || tool.Mode&0o7777 != 0o755 {
		t.Errorf("src/main.go has mode %o, tool %o; want 755 (set-id bits stripped)", after.Mode&0o7777, tool.Mode&0o7777)
	}
	if n, _ := unix.Getxattr(filepath.Join(e.host, "src/main.go"), "user.mark", make([]byte, 8)); n > 0 {
		t.Errorf("src/main.go kept the sandbox's extended attribute")
	}
	if flagged {
		f, err := os.Open(filepath.Join(e.host, "nodump"))
		must(t, err)
		fl, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		f.Close()
		if err != nil || fl&nodumpFlag != 0 {
			t.Errorf("nodump landed with the sandbox's inode flags (%#x, %v)", fl, err)
		}
	}
	for p, want := range map[string]string{"keep.txt": "new\n", "same1": "twin\n", "same2": "twin\n"} {
		if b, err := os.ReadFile(filepath.Join(e.host, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{".yarnrc.yml", ".claude", ".claude/settings.json"} {
		if _, err := os.Lstat(filepath.Join(e.host, p)); err == nil {
			t.Errorf("%s landed; it is held", p)
		}
	}

	// What waits is the held changes alone, under their own digest, and
	// loads as any set does, with its blobs.
	got, err := Load(e.state, testRun)
	must(t, err)
	var paths []string
	for _, c := range got.Changes {
		paths = append(paths, c.Path)
	}
	if want := []string{".claude", ".claude/settings.json", ".yarnrc.yml"}; !slices.Equal(paths, want) {
		t.Fatalf("waiting: %q, want %q", paths, want)
	}
	if got.Digest != rest.Digest || got.Digest == s.Digest {
		t.Errorf("digest %s (returned %s, captured %s): want the rest's own", got.Digest, rest.Digest, s.Digest)
	}
	rep, err = Apply(got, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Applied) != 3 {
		t.Fatalf("applying the rest: %+v", rep)
	}
	if b, err := os.ReadFile(filepath.Join(e.host, ".yarnrc.yml")); err != nil || string(b) != "yarnPath: ./y.cjs\n" {
		t.Errorf(".yarnrc.yml: %q, %v", b, err)
	}
}

// A change the host made during the run is not landed: it waits with the
// held ones. A set of which nothing waits is removed.
func TestLandConflictWaits(t *testing.T) {
	e := newEnv(t)
	e.start()
	write(t, filepath.Join(e.upper, "a"), "sandbox\n", 0o644)
	write(t, filepath.Join(e.upper, "b"), "b\n", 0o644)
	write(t, filepath.Join(e.host, "a"), "host\n", 0o644) // during the run
	s, layer := e.captureToLand(t)
	rep, rest, err := Land(s, layer, e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(t, err)
	if len(rep.Conflicts) != 1 || len(rest.Changes) != 1 || rest.Changes[0].Path != "a" {
		t.Fatalf("report %+v, waiting %+v: want a waiting as a conflict", rep, rest.Changes)
	}
	if b, _ := os.ReadFile(filepath.Join(e.host, "a")); string(b) != "host\n" {
		t.Errorf("a: %q, want the host's", b)
	}

	e2 := newEnv(t)
	e2.start()
	write(t, filepath.Join(e2.upper, "c"), "c\n", 0o644)
	s2, layer2 := e2.captureToLand(t)
	_, rest2, err := Land(s2, layer2, e2.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(t, err)
	if len(rest2.Changes) != 0 || Exists(e2.state, testRun) {
		t.Errorf("nothing waits, yet the set is kept: %+v", rest2.Changes)
	}
}

// nodumpFlag is chattr's d.
const nodumpFlag = 0x00000040

// captureToLand captures e's layer for landing; the layer stays open
// until the test ends.
func (e *env) captureToLand(t *testing.T) (*Set, *os.File) {
	t.Helper()
	layer, err := os.Open(e.layer)
	must(t, err)
	t.Cleanup(func() { layer.Close() })
	s, err := Capture(layer, e.host, e.state, testRun, e.started, Limits{Link: true})
	must(t, err)
	return s, layer
}

// A new directory of which everything lands, all of it plain, lands whole:
// the sandbox's directory itself is renamed into place. One that holds
// something held, or something not plain, lands file by file; one whose
// name the host took during the run waits, with all it holds.
func TestLandWholeDirectories(t *testing.T) {
	e := newEnv(t)
	e.start()
	for i := range 50 {
		write(t, filepath.Join(e.upper, "out", "sub", fmt.Sprintf("f%d.o", i)), fmt.Sprintf("object %d\n", i), 0o644)
	}
	must(t, os.Symlink("sub/f1.o", filepath.Join(e.upper, "out", "link")))
	write(t, filepath.Join(e.upper, "mixed", "a.txt"), "a\n", 0o644)
	write(t, filepath.Join(e.upper, "mixed", ".envrc"), "export X=1\n", 0o644)
	// Kept at capture (a name the judgment reads again), as the waiting
	// .envrc's content is: the blob they share is not the landed file.
	write(t, filepath.Join(e.upper, "out", "config"), "export X=1\n", 0o644)
	write(t, filepath.Join(e.upper, "setid", "tool"), "#!/bin/sh\n", 0o2755)
	write(t, filepath.Join(e.upper, "taken", "x"), "x\n", 0o644)
	var before unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.upper, "out"), &before))

	s, layer := e.captureToLand(t)
	must(t, os.Mkdir(filepath.Join(e.host, "taken"), 0o755)) // since the capture
	rep, rest, err := Land(s, layer, e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
	must(t, err)

	var after unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.host, "out"), &after))
	if after.Ino != before.Ino {
		t.Errorf("out/ was made anew (inode %d), not the sandbox's (%d) renamed", after.Ino, before.Ino)
	}
	if b, err := os.ReadFile(filepath.Join(e.host, "out", "sub", "f49.o")); err != nil || string(b) != "object 49\n" {
		t.Errorf("out/sub/f49.o: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(e.host, "out", "link")); err != nil || l != "sub/f1.o" {
		t.Errorf("out/link: %q, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(e.host, "mixed", "a.txt")); err != nil {
		t.Errorf("mixed/a.txt did not land: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(e.host, "mixed", ".envrc")); err == nil {
		t.Error("mixed/.envrc landed; it is held")
	}
	var tool unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.host, "setid", "tool"), &tool))
	if tool.Mode&0o7777 != 0o755 {
		t.Errorf("setid/tool has mode %o, want 755", tool.Mode&0o7777)
	}
	if _, err := os.Lstat(filepath.Join(e.host, "taken", "x")); err == nil {
		t.Error("taken/x landed in the directory the host made since the capture")
	}
	waiting := map[string]bool{}
	for _, c := range rest.Changes {
		waiting[c.Path] = true
	}
	for _, p := range []string{"mixed/.envrc", "taken", "taken/x"} {
		if !waiting[p] {
			t.Errorf("%s does not wait; waiting: %v", p, waiting)
		}
	}
	var landed, blob unix.Stat_t
	must(t, unix.Stat(filepath.Join(e.host, "out", "config"), &landed))
	for _, c := range rest.Changes {
		if c.Path == "mixed/.envrc" {
			must(t, unix.Stat(filepath.Join(e.state, testRun, blobDir, c.SHA256), &blob))
		}
	}
	if blob.Ino == landed.Ino {
		t.Error("the waiting .envrc's blob is the landed out/config itself")
	}
	if len(rep.Applied) < 53 {
		t.Errorf("%d applied, want out/ and all it holds among them", len(rep.Applied))
	}
}

// What landed from a layer that stays in use is remembered (Remember):
// the next capture finds it unchanged on both sides without a change, a
// file the sandbox changed again is no conflict (only cordon changed the
// host's), and a host change since the landing is one.
func TestRememberLanded(t *testing.T) {
	e := newEnv(t)
	e.start()
	layer, err := os.Open(e.layer)
	must(t, err)
	defer layer.Close()
	landed := map[string]Landed{}
	land := func() (*Set, *Report) {
		t.Helper()
		s, err := Capture(layer, e.host, e.state, testRun, e.started, Limits{Landed: landed})
		must(t, err)
		rep, _, err := Land(s, layer, e.state, Review{Require: []string{"protected"}}, ApplyOptions{})
		must(t, err)
		landed = Remember(s, rep, landed)
		return s, rep
	}
	write(t, filepath.Join(e.upper, "f"), "1\n", 0o644)
	write(t, filepath.Join(e.upper, "d/g"), "g\n", 0o644)
	if _, rep := land(); len(rep.Applied) != 3 {
		t.Fatalf("first landing: %+v", rep)
	}
	for _, p := range []string{"f", "d", "d/g"} {
		if k, ok := landed[p]; !ok || k.Host == 0 || (p != "d" && k.Upper == 0) {
			t.Fatalf("%s is remembered as %+v (%v)", p, k, ok)
		}
	}
	s, err := Capture(layer, e.host, e.state, testRun, e.started, Limits{Landed: landed})
	must(t, err)
	if len(s.Changes) != 0 || !sameNote(s.still["f"], landed["f"]) || !sameNote(s.still["d/g"], landed["d/g"]) {
		t.Fatalf("a capture after the landing: %+v, still %+v", s.Changes, s.still)
	}
	must(t, Discard(e.state, testRun))

	write(t, filepath.Join(e.upper, "f"), "2\n", 0o644)
	if s, rep := land(); len(rep.Applied) != 1 || len(rep.Conflicts) != 0 || s.Changes[0].Has(FlagConflict) {
		t.Fatalf("f changed again in the layer: %+v, %+v", s.Changes, rep)
	}
	if b, _ := os.ReadFile(filepath.Join(e.host, "f")); string(b) != "2\n" {
		t.Fatalf("the host's f: %q", b)
	}

	write(t, filepath.Join(e.host, "f"), "the host's\n", 0o644)
	write(t, filepath.Join(e.upper, "f"), "3\n", 0o644)
	s, err = Capture(layer, e.host, e.state, testRun, e.started, Limits{Landed: landed})
	must(t, err)
	if len(s.Changes) != 1 || !s.Changes[0].Has(FlagConflict) {
		t.Fatalf("f changed on the host since it landed: %+v", s.Changes)
	}
	// Without what landed, the landing itself is taken for a host change.
	must(t, Discard(e.state, testRun))
	write(t, filepath.Join(e.upper, "d/g"), "g2\n", 0o644)
	s, err = Capture(layer, e.host, e.state, testRun, e.started, Limits{})
	must(t, err)
	if i := slices.IndexFunc(s.Changes, func(c Change) bool { return c.Path == "d/g" }); i < 0 || !s.Changes[i].Has(FlagConflict) {
		t.Fatalf("a capture told nothing of what landed did not flag d/g (%+v): the test proves nothing", s.Changes)
	}
}

// sameNote says whether two notes of a path name the same host state and
// layer entry (a capture may have found a note's racy change time settled
// since).
func sameNote(a, b Landed) bool {
	a.UpperRacy, b.UpperRacy = false, false
	return a == b && a.Host != 0
}
