//go:build linux

package protect

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tick returns a time after the change time of everything in dir so far
// and at or before that of whatever is made next: the file system's clock
// is coarse, so it waits for a file whose change time is past the last.
func tick(t *testing.T, dir string) time.Time {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(dir, &st))
	last := st.Ctim.Nano()
	probe := filepath.Join(t.TempDir(), "tick")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		must(t, os.WriteFile(probe, nil, 0o644))
		must(t, unix.Stat(probe, &st))
		if st.Ctim.Nano() > last {
			return time.Unix(0, st.Ctim.Nano())
		}
		must(t, os.Remove(probe))
	}
	t.Fatal("the file system's clock did not move in 5 s")
	return time.Time{}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, p, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

// What a run made that the host's tools obey, below what direct mode can
// hold back, is found; what the plan held, data a repository's work
// changes, and what was there before are not.
func TestFindMade(t *testing.T) {
	root := t.TempDir()
	put(t, root+"/src/main.go", "package main\n")
	put(t, root+"/old/.git/HEAD", "ref: refs/heads/main\n")
	put(t, root+"/old/.git/config", "[core]\n")
	must(t, os.MkdirAll(root+"/old/.git/objects/ab", 0o755))
	must(t, os.MkdirAll(root+"/old/.git/refs/heads", 0o755))
	put(t, root+"/old/.hg/hgrc", "")
	p, err := Make(root, Options{})
	must(t, err)
	held := p.Entries
	p.Remove()
	since := tick(t, root)

	// The run: data of the old repositories, a hook manager's file it
	// changed, and what it made.
	put(t, root+"/old/.git/objects/ab/cdef", "blob")
	put(t, root+"/old/.hg/store/data", "x")
	put(t, root+"/old/.git/config", "[core]\n\tfsmonitor = touch /tmp/x\n")
	put(t, root+"/new/.git/config", "[core]\n\tfsmonitor = x\n")
	put(t, root+"/bare/HEAD", "ref: refs/heads/main\n")
	must(t, os.MkdirAll(root+"/bare/objects", 0o755))
	must(t, os.MkdirAll(root+"/bare/refs", 0o755))
	put(t, root+"/bare/config", "[core]\n\tworktree = ..\n")
	put(t, root+"/app/.yarnrc.yml", "yarnPath: ./y.cjs\n")
	put(t, root+"/app/y.cjs", "x")
	put(t, root+"/agents/dev.yml", "{version: 1, agent: dev}\n")
	put(t, root+"/agents/notes.yml", "title: x\n")
	put(t, root+"/src/util.go", "package main\n")

	found, complete, err := FindMade(root, since, held)
	must(t, err)
	if !complete {
		t.Error("a small tree was not looked at in full")
	}
	got := map[string]Made{}
	for _, m := range found {
		got[m.Rel] = m
	}
	want := map[string]string{"old/.git/config": "git", "new/.git": "git", "bare": "git", "app/.yarnrc.yml": "npm, yarn, pnpm", "agents/dev.yml": "cordon"}
	for rel, tool := range want {
		if got[rel].Tool != tool {
			t.Errorf("%s: found %+v, want %s (all: %+v)", rel, got[rel], tool, found)
		}
	}
	if len(found) != len(want) {
		t.Errorf("found %d, want %d: %+v", len(found), len(want), found)
	}
	if got["old/.git/config"].Created {
		t.Error("a file changed in the run is reported made by it")
	}
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, root, 0, unix.STATX_BTIME, &stx) == nil && stx.Mask&unix.STATX_BTIME != 0 && !got["new/.git"].Created {
		t.Error("a repository the run made is not reported made")
	}
	if slices.ContainsFunc(found, func(m Made) bool { return m.Rel == ".git" || m.Rel == "HEAD" }) {
		t.Error("what the plan held is reported")
	}
}
