//go:build linux

package changes

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// overlay mounts, as a sandbox in review mode has it, a tmpfs for the
// layer and an overlay of the host under it (userxattr: no redirect_dir,
// no metacopy); unmount takes the overlay away, as the sandbox's end does,
// leaving the layer.
func overlay(t *testing.T, e *env) (merged string, unmount func()) {
	t.Helper()
	root(t)
	must(t, unix.Mount("tmpfs", e.layer, "tmpfs", 0, "size=64m,nr_inodes=4096,mode=0700"))
	t.Cleanup(func() { unix.Unmount(e.layer, unix.MNT_DETACH) })
	must(t, os.Mkdir(e.upper, 0o755))
	must(t, os.Mkdir(e.layer+"/work", 0o755))
	merged = filepath.Join(filepath.Dir(e.layer), "merged")
	must(t, os.Mkdir(merged, 0o755))
	opts := "lowerdir=" + e.host + ",upperdir=" + e.upper + ",workdir=" + e.layer + "/work,userxattr"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("cannot mount an overlay here: %v", err)
	}
	done := false
	unmount = func() {
		if !done {
			done = true
			must(t, unix.Unmount(merged, 0))
		}
	}
	t.Cleanup(func() {
		if !done {
			unix.Unmount(merged, unix.MNT_DETACH)
		}
	})
	return merged, unmount
}

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", args, err, out)
	}
}

// hostTree is the workspace of the real-overlay tests before the run.
func hostTree(t *testing.T, h string) {
	write(t, h+"/mod.txt", "one\ntwo\n", 0o644)
	write(t, h+"/del.txt", "delete me\n", 0o644)
	write(t, h+"/ren-old.txt", "renamed\n", 0o644)
	write(t, h+"/script.sh", "#!/bin/sh\necho hi\n", 0o644)
	write(t, h+"/target.txt", "target\n", 0o644)
	write(t, h+"/tree/a.txt", "a\n", 0o644)
	write(t, h+"/tree/sub/b.txt", "b\n", 0o644)
	write(t, h+"/dirA/x.txt", "x\n", 0o644)
	write(t, h+"/keep.txt", "keep\n", 0o644)
	write(t, h+"/.git/HEAD", "ref: refs/heads/main\n", 0o644)
}

// sandboxRun does, in the merged view, what an agent might.
func sandboxRun(t *testing.T, m string) {
	write(t, m+"/added.txt", "added\n", 0o644)
	f, err := os.OpenFile(m+"/mod.txt", os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	f.WriteString("three\n")
	f.Close()
	must(t, os.Remove(m+"/del.txt"))
	must(t, os.Rename(m+"/ren-old.txt", m+"/ren-new.txt"))
	must(t, os.Chmod(m+"/script.sh", 0o755))
	must(t, os.Symlink("target.txt", m+"/link-in"))
	must(t, os.Symlink("/etc/passwd", m+"/link-out"))
	write(t, m+"/.git/hooks/pre-commit", "#!/bin/sh\ncurl evil\n", 0o755)
	must(t, os.RemoveAll(m+"/tree"))
	write(t, m+"/tree/only.txt", "only\n", 0o644)
	run(t, m, "mv", "dirA", "dirB") // no redirect_dir: copied, then deleted
	must(t, unix.Mkfifo(m+"/fifo", 0o644))
	write(t, m+"/new\nline", "newline\n", 0o644)
	run(t, m, "touch", "keep.txt") // copied up, unchanged
}

func TestRealOverlay(t *testing.T) {
	e := newEnv(t)
	hostTree(t, e.host)
	before := tree(t, e.host, false)
	e.start()
	m, unmount := overlay(t, e)
	sandboxRun(t, m)
	want := tree(t, m, true)
	unmount()
	sameTree(t, tree(t, e.host, false), before) // the host is not written

	s := e.mustCapture(t)
	sameList(t, "changes", summaries(s.Changes), []string{
		`added dir ".git/hooks"`,
		`added file ".git/hooks/pre-commit" [executable,protected]`,
		`added file "added.txt"`,
		`deleted file "del.txt"`,
		`deleted dir "dirA"`,
		`deleted file "dirA/x.txt"`,
		`added dir "dirB"`,
		`added file "dirB/x.txt"`,
		`added special "fifo" [special]`,
		`added symlink "link-in"`,
		`added symlink "link-out" [outside_link]`,
		`modified file "mod.txt"`,
		`added file "new\nline"`,
		`added file "ren-new.txt"`,
		`deleted file "ren-old.txt"`,
		`modified file "script.sh" [executable]`,
		`deleted file "tree/a.txt"`,
		`added file "tree/only.txt"`,
		`deleted dir "tree/sub"`,
		`deleted file "tree/sub/b.txt"`,
	})

	// Discard leaves the host as it was.
	must(t, Discard(e.state, testRun))
	if _, err := Load(e.state, testRun); err == nil {
		t.Errorf("a discarded set loads")
	}
	sameTree(t, tree(t, e.host, false), before)
	s = e.mustCapture(t)

	rep, err := Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Conflicts) > 0 || !slices.Equal(rep.Refused, []string{"fifo"}) || len(rep.Already) > 0 {
		t.Errorf("report: %+v", rep)
	}
	sameTree(t, tree(t, e.host, false), want)

	// A second apply finds everything in place.
	s, err = Load(e.state, testRun)
	must(t, err)
	if len(s.Applied) != len(s.Changes)-1 {
		t.Errorf("applied.json: %q", s.Applied)
	}
	rep, err = Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Applied) > 0 || len(rep.Conflicts) > 0 || len(rep.Already) != len(s.Changes)-1 {
		t.Errorf("second apply: %+v", rep)
	}
	sameTree(t, tree(t, e.host, false), want)
}

// A host change after the capture, or during the run, is a conflict: that
// path is left alone, the others land.
func TestApplyConflicts(t *testing.T) {
	e := newEnv(t)
	write(t, e.host+"/mod.txt", "old\n", 0o644)
	write(t, e.host+"/during.txt", "old\n", 0o644)
	write(t, e.host+"/del.txt", "old\n", 0o644)
	write(t, e.host+"/ok.txt", "old\n", 0o644)
	must(t, os.Mkdir(e.host+"/dir", 0o755))
	e.start()
	// The host changes during.txt while the run goes on: its change time
	// is after the start (written again until the clock shows it).
	for i := 0; ; i++ {
		write(t, e.host+"/during.txt", "host\n", 0o644)
		var st unix.Stat_t
		must(t, unix.Lstat(e.host+"/during.txt", &st))
		if st.Ctim.Nano() >= e.started.UnixNano() {
			break
		}
		if i > 1000 {
			t.Fatal("the change time does not pass the start")
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
	}
	write(t, e.upper+"/mod.txt", "sandbox\n", 0o644)
	write(t, e.upper+"/during.txt", "sandbox\n", 0o644)
	write(t, e.upper+"/ok.txt", "sandbox\n", 0o644)
	write(t, e.upper+"/new.txt", "sandbox\n", 0o644)
	write(t, e.upper+"/dir/new.txt", "sandbox\n", 0o644)
	write(t, e.upper+"/newdir/f", "sandbox\n", 0o644)
	whiteoutIfRoot(t, e, "del.txt")
	s := e.mustCapture(t)
	for _, c := range s.Changes {
		if c.Has(FlagConflict) != (c.Path == "during.txt") {
			t.Errorf("%s", summary(c))
		}
	}
	// After the capture, the host changes mod.txt, makes new.txt and
	// newdir, and puts a file in a directory the set deletes.
	write(t, e.host+"/mod.txt", "host\n", 0o644)
	write(t, e.host+"/new.txt", "host\n", 0o644)
	write(t, e.host+"/newdir/g", "host\n", 0o644)
	must(t, os.Chmod(e.host+"/newdir", 0o700))
	write(t, e.host+"/dir/new.txt", "host\n", 0o644)

	rep, err := Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	var conflicts []string
	for _, c := range rep.Conflicts {
		conflicts = append(conflicts, c.Path+": "+c.Why)
	}
	sameList(t, "conflicts", conflicts, []string{
		`dir/new.txt: the host has made it since the run started`,
		`during.txt: the host has changed it since the run started`,
		`mod.txt: the host has changed it since the run started`,
		`new.txt: the host has made it since the run started`,
		`newdir: the host has made it since the run started`,
		`newdir/f: directory "newdir" was not applied: the host has made it since the run started`,
	})
	for p, want := range map[string]string{"mod.txt": "host\n", "during.txt": "host\n", "new.txt": "host\n", "dir/new.txt": "host\n", "ok.txt": "sandbox\n", "newdir/g": "host\n"} {
		if got := readString(t, e.host+"/"+p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	if _, err := os.Lstat(e.host + "/newdir/f"); err == nil {
		t.Errorf("newdir/f landed in the host's own directory")
	}
	if os.Geteuid() == 0 {
		if _, err := os.Lstat(e.host + "/del.txt"); err == nil {
			t.Errorf("del.txt not deleted")
		}
	}
}

func whiteoutIfRoot(t *testing.T, e *env, rel string) {
	if os.Geteuid() == 0 {
		whiteoutAt(t, e.upper+"/"+rel)
	}
}

// A deletion of a directory the host has put something in is refused.
func TestApplyDeleteNonEmpty(t *testing.T) {
	root(t)
	e := newEnv(t)
	write(t, e.host+"/d/a", "a", 0o644)
	e.start()
	whiteoutAt(t, e.upper+"/d")
	s := e.mustCapture(t)
	write(t, e.host+"/d/host-new", "h", 0o644)
	rep, err := Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	if !slices.Equal(rep.Applied, []string{"d/a"}) || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "d" || !strings.Contains(rep.Conflicts[0].Why, "something new") {
		t.Errorf("report %+v", rep)
	}
	if readString(t, e.host+"/d/host-new") != "h" {
		t.Errorf("the host's new file is gone")
	}
}

// A link planted in the host tree after the capture, on the way to a path
// or at the path itself, is not followed: nothing lands outside.
func TestApplyNoFollow(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	write(t, outside+"/victim", "untouched\n", 0o644)
	write(t, e.host+"/sub/file", "old\n", 0o644)
	write(t, e.host+"/top", "old\n", 0o644)
	e.start()
	write(t, e.upper+"/sub/file", "sandbox\n", 0o644)
	write(t, e.upper+"/sub/new", "sandbox\n", 0o644)
	write(t, e.upper+"/top", "sandbox\n", 0o644)
	s := e.mustCapture(t)

	must(t, os.RemoveAll(e.host+"/sub"))
	must(t, os.Symlink(outside, e.host+"/sub"))
	must(t, os.Remove(e.host+"/top"))
	must(t, os.Symlink(outside+"/victim", e.host+"/top"))

	rep, err := Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Applied) > 0 || len(rep.Conflicts) != 3 {
		t.Errorf("report %+v", rep)
	}
	for _, c := range rep.Conflicts {
		if c.Path != "top" && !strings.Contains(c.Why, "symbolic link") {
			t.Errorf("%s: %s", c.Path, c.Why)
		}
	}
	sameTree(t, tree(t, outside, false), map[string]entry{"victim": {typ: "file", mode: 0o644, content: "untouched\n"}})
	if tgt, _ := os.Readlink(e.host + "/top"); tgt != outside+"/victim" {
		t.Errorf("top: %q", tgt)
	}
}

// The workspace itself given through a link is refused.
func TestApplyRootLink(t *testing.T) {
	e := newEnv(t)
	e.start()
	write(t, e.upper+"/f", "x", 0o644)
	s := e.mustCapture(t)
	real := e.host + ".real"
	must(t, os.Rename(e.host, real))
	must(t, os.Symlink(real, e.host))
	if _, err := Apply(s, e.state, nil, ApplyOptions{}); err == nil {
		t.Fatal("applied through a link to the workspace")
	}
	if _, err := os.Lstat(real + "/f"); err == nil {
		t.Error("f landed")
	}
}

// Set-id bits are stripped, modes are set whatever the umask, and new
// paths are given Owner.
func TestApplyModesOwner(t *testing.T) {
	root(t)
	e := newEnv(t)
	write(t, e.host+"/mine", "old", 0o644)
	must(t, os.Chown(e.host+"/mine", 4321, 4321))
	e.start()
	write(t, e.upper+"/suid", "s", 0o6755)
	write(t, e.upper+"/mine", "new", 0o600)
	must(t, os.MkdirAll(e.upper+"/ro/sub", 0o755))
	write(t, e.upper+"/ro/sub/f", "f", 0o444)
	must(t, unix.Chmod(e.upper+"/ro", 0o555))
	must(t, unix.Chmod(e.upper+"/ro/sub", 0o1777))
	must(t, os.Symlink("suid", e.upper+"/l"))
	s := e.mustCapture(t)
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	rep, err := Apply(s, e.state, nil, ApplyOptions{Owner: &[2]int{1234, 5678}})
	must(t, err)
	if len(rep.Conflicts) > 0 {
		t.Fatalf("report %+v", rep)
	}
	for p, want := range map[string][3]uint32{
		"suid":     {0o755, 1234, 5678},
		"mine":     {0o600, 4321, 4321},
		"ro":       {0o555, 1234, 5678},
		"ro/sub":   {0o1777, 1234, 5678},
		"ro/sub/f": {0o444, 1234, 5678},
		"l":        {0o777, 1234, 5678},
	} {
		var st unix.Stat_t
		must(t, unix.Lstat(e.host+"/"+p, &st))
		if got := [3]uint32{st.Mode & 07777, st.Uid, st.Gid}; got != want {
			t.Errorf("%s: mode %o owner %d:%d, want %o %d:%d", p, got[0], got[1], got[2], want[0], want[1], want[2])
		}
	}
}

// Select takes paths and directories, and names a path that selects
// nothing.
func TestSelect(t *testing.T) {
	e := newEnv(t)
	e.start()
	write(t, e.upper+"/a/b/c", "c", 0o644)
	write(t, e.upper+"/a/bc", "bc", 0o644)
	write(t, e.upper+"/z", "z", 0o644)
	s := e.mustCapture(t)
	for _, tc := range []struct {
		paths []string
		want  []string
	}{
		{nil, []string{"a", "a/b", "a/b/c", "a/bc", "z"}},
		{[]string{"."}, []string{"a", "a/b", "a/b/c", "a/bc", "z"}},
		{[]string{"a/b"}, []string{"a/b", "a/b/c"}},
		{[]string{"./a/b/", "z"}, []string{"a/b", "a/b/c", "z"}},
		{[]string{e.host + "/a/bc"}, []string{"a/bc"}},
	} {
		got, err := s.Select(tc.paths)
		must(t, err)
		var paths []string
		for _, c := range got {
			paths = append(paths, c.Path)
		}
		sameList(t, strings.Join(tc.paths, " "), paths, tc.want)
	}
	for _, bad := range []string{"a/b/c/d", "nothing", "../x", "/etc/passwd", "ax"} {
		if _, err := s.Select([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("Select(%q): %v", bad, err)
		}
	}
	rep, err := Apply(s, e.state, []string{"a/b"}, ApplyOptions{})
	must(t, err)
	// The added directory above what is selected comes along.
	sameList(t, "applied", rep.Applied, []string{"a", "a/b", "a/b/c"})
}

// Load refuses a bad run id, a set whose digest does not match and a path
// that leaves the workspace.
func TestLoadRefuses(t *testing.T) {
	e := newEnv(t)
	e.start()
	write(t, e.upper+"/f", "f", 0o644)
	e.mustCapture(t)
	for _, run := range []string{"", "..", "../x", "a/b", "A", "-x", strings.Repeat("a", 65)} {
		if _, err := Load(e.state, run); err == nil {
			t.Errorf("Load(%q) succeeded", run)
		}
		if err := Discard(e.state, run); err == nil {
			t.Errorf("Discard(%q) succeeded", run)
		}
	}
	p := filepath.Join(e.state, testRun, setFile)
	orig := readString(t, p)
	for _, edit := range [][2]string{{`"path": "f"`, `"path": "g"`}, {`"mode": 420`, `"mode": 2541`}} {
		must(t, os.WriteFile(p, []byte(strings.Replace(orig, edit[0], edit[1], 1)), 0o600))
		if _, err := Load(e.state, testRun); err == nil || !strings.Contains(err.Error(), "digest") {
			t.Errorf("edited %s: %v", edit[0], err)
		}
	}
	must(t, os.WriteFile(p, []byte(strings.Replace(orig, `"path": "f"`, `"path": "../f"`, 1)), 0o600))
	if _, err := Load(e.state, testRun); err == nil || !strings.Contains(err.Error(), "invalid path") {
		t.Errorf("path ../f: %v", err)
	}
}

// List shows complete sets, newest first; an incomplete capture is
// skipped.
func TestList(t *testing.T) {
	e := newEnv(t)
	e.start()
	layer, err := os.Open(e.layer)
	must(t, err)
	defer layer.Close()
	for _, run := range []string{"r1", "r2"} {
		_, err := Capture(layer, e.host, e.state, run, e.started, Limits{})
		must(t, err)
	}
	must(t, os.MkdirAll(filepath.Join(e.state, "r3", blobDir), 0o700)) // incomplete
	// A set that cannot be read hides none of the others.
	must(t, os.MkdirAll(filepath.Join(e.state, "r4"), 0o700))
	must(t, os.WriteFile(filepath.Join(e.state, "r4", setFile), []byte("{not json"), 0o600))
	sets, broken, err := List(e.state)
	must(t, err)
	if len(sets) != 2 || sets[0].Run != "r2" || sets[1].Run != "r1" {
		t.Errorf("List: %v", sets)
	}
	if len(broken) != 1 || !strings.Contains(broken[0].Error(), "r4") {
		t.Errorf("broken: %v, want r4's error", broken)
	}
	must(t, Discard(e.state, "r4"))
	must(t, Discard(e.state, "r2"))
	if sets, broken, _ = List(e.state); len(sets) != 1 || len(broken) != 0 {
		t.Errorf("after discard: %d sets, %v", len(sets), broken)
	}
	if err := Discard(e.state, "r2"); err == nil {
		t.Errorf("discard twice")
	}
}

// A tampered blob is not applied.
func TestApplyBlobChecked(t *testing.T) {
	e := newEnv(t)
	e.start()
	write(t, e.upper+"/f", "right", 0o644)
	s := e.mustCapture(t)
	blob := filepath.Join(e.state, testRun, blobDir, s.Changes[0].SHA256)
	must(t, os.Chmod(blob, 0o600))
	must(t, os.WriteFile(blob, []byte("wrong"), 0o600))
	rep, err := Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Conflicts) != 1 || !strings.Contains(rep.Conflicts[0].Why, "does not match") {
		t.Errorf("report %+v", rep)
	}
	if _, err := os.Lstat(e.host + "/f"); err == nil {
		t.Errorf("f landed")
	}
	leftovers(t, e.host)
}

// leftovers fails if a temporary file of Apply is left in dir.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	for p := range tree(t, dir, false) {
		if strings.Contains(p, ".cordon-apply-") {
			t.Errorf("left behind: %s", p)
		}
	}
}
