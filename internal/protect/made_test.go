//go:build linux

package protect

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tick returns a time after the change time of everything in dir so far
// and at or before that of whatever is made next: the file system's clock
// is coarse, so it waits for a file whose change time is past the last.
// protected protects root as a run would, ends that protection, and
// returns what it held and when the run began, for FindMade.
func protected(t *testing.T, root string) ([]Entry, time.Time) {
	t.Helper()
	p, err := Make(root, Options{})
	must(t, err)
	held := p.Entries
	p.Remove()
	return held, tick(t, root)
}

func tick(t *testing.T, dir string) time.Time {
	t.Helper()
	var st unix.Stat_t
	var last int64
	must(t, filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && unix.Lstat(p, &st) == nil {
			last = max(last, st.Ctim.Nano())
		}
		return err
	}))
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
	held, since := protected(t, root)

	// The run: data of the old repositories, a hook manager's file it
	// changed, and what it made.
	put(t, root+"/old/.git/objects/ab/cccccccccccccccccccccccccccccccccccccc", "blob")
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

	found, complete, err := FindMade(root, since, held, "")
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

// With an index of the tree kept from the last look, a look lists only the
// directories whose change time moved, and finds what a full look finds:
// what is made deep in a directory untouched since, a file of a known
// repository changed in place, a file the run moved (a rename changes the
// moved file's change time; what a moved directory holds keeps its own).
func TestFindMadeIndex(t *testing.T) {
	root := t.TempDir()
	index := filepath.Join(t.TempDir(), "walk")
	put(t, root+"/a/b/c/keep.txt", "x")
	put(t, root+"/old/.git/HEAD", "ref: refs/heads/main\n")
	put(t, root+"/old/.git/config", "[core]\n")
	must(t, os.MkdirAll(root+"/old/.git/objects", 0o755))
	must(t, os.MkdirAll(root+"/old/.git/refs", 0o755))
	put(t, root+"/moved/x/.npmrc", "registry=x\n")
	since := tick(t, root)
	if found, complete, err := FindMade(root, since, nil, index); err != nil || !complete || len(found) != 0 {
		t.Fatalf("first look: %v %v %+v", err, complete, found)
	}
	if _, err := os.Stat(index); err != nil {
		t.Fatalf("no index kept: %v", err)
	}
	since = tick(t, root)
	put(t, root+"/a/b/c/.yarnrc.yml", "yarnPath: y.cjs\n")
	put(t, root+"/a/b/c/deep/new/.hg/hgrc", "[hooks]\n")
	f, err := os.OpenFile(root+"/old/.git/config", os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("\tfsmonitor = x\n")
	must(t, err)
	must(t, f.Close())
	must(t, os.MkdirAll(root+"/a/moved", 0o755))
	must(t, os.Rename(root+"/moved/x/.npmrc", root+"/a/moved/.npmrc"))
	for _, idx := range []string{index, ""} {
		found, complete, err := FindMade(root, since, nil, idx)
		must(t, err)
		got := map[string]bool{}
		for _, m := range found {
			got[m.Rel] = true
		}
		for _, want := range []string{"a/b/c/.yarnrc.yml", "a/b/c/deep/new/.hg", "old/.git/config", "a/moved/.npmrc"} {
			if !got[want] {
				t.Errorf("index %q: %s not found (complete %v, all: %+v)", idx, want, complete, found)
			}
		}
	}
	// An index of another tree is not used: its directories would hide
	// this one's.
	other := t.TempDir()
	put(t, other+"/a/b/c/keep.txt", "x")
	since = tick(t, other)
	put(t, other+"/a/b/c/.envrc", "x")
	found, _, err := FindMade(other, since, nil, index)
	must(t, err)
	if len(found) != 1 || found[0].Rel != "a/b/c/.envrc" {
		t.Errorf("with another tree's index: %+v", found)
	}
}

// The workspace's own repository is held by the plan, but what the run
// makes at the top of it beyond git's data is reported: an interrupted
// rebase's commands, which a person's git rebase --continue runs.
func TestFindMadeGitExtras(t *testing.T) {
	root := t.TempDir()
	put(t, root+"/.git/HEAD", "ref: refs/heads/main\n")
	must(t, os.MkdirAll(root+"/.git/objects", 0o755))
	must(t, os.MkdirAll(root+"/.git/refs/heads", 0o755))
	held, since := protected(t, root)
	put(t, root+"/.git/objects/ab/cccccccccccccccccccccccccccccccccccccc", "blob")
	put(t, root+"/.git/refs/heads/main", "0123\n")
	put(t, root+"/.git/index", "DIRC")
	put(t, root+"/.git/rebase-merge/git-rebase-todo", "exec touch /tmp/pwned\n")
	found, _, err := FindMade(root, since, held, "")
	must(t, err)
	if len(found) != 1 || found[0].Rel != ".git/rebase-merge" {
		t.Errorf("found %+v, want .git/rebase-merge alone", found)
	}
}

// The search for credentials shares the look's walk and index: what a
// tree holds is found in full at first, and what is made in it between
// two searches is found by the second, which lists only what changed.
func TestSensitiveIn(t *testing.T) {
	root := t.TempDir()
	index := filepath.Join(t.TempDir(), "walk")
	put(t, root+"/a/b/c/keep.txt", "x")
	for _, idx := range []string{"", index} {
		if why := SensitiveIn(root, idx); why != "" {
			t.Fatalf("a plain tree is refused: %s", why)
		}
	}
	must(t, os.MkdirAll(root+"/a/b/c/.ssh", 0o700))
	for _, idx := range []string{index, ""} {
		if why := SensitiveIn(root, idx); !strings.Contains(why, "a/b/c/.ssh") {
			t.Errorf("index %q: a .ssh made since the last search is not found: %q", idx, why)
		}
	}
	must(t, os.Remove(root+"/a/b/c/.ssh"))
	if why := SensitiveIn(root, index); why != "" {
		t.Errorf("a .ssh removed since is still found: %s", why)
	}
}
