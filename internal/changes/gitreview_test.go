//go:build linux

package changes

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// git runs git in dir as a person would, with no configuration of the
// machine's.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=A", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=A", "GIT_COMMITTER_EMAIL=a@x"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", args, err, out)
	}
	return string(out)
}

// hostRepo makes a repository with one commit at dir.
func hostRepo(t *testing.T, dir string) {
	t.Helper()
	write(t, dir+"/README", "hello\n", 0o644)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-qm", "first")
}

// noneProtected fails for each change of s flagged protected.
func noneProtected(t *testing.T, s *Set) {
	t.Helper()
	for _, c := range s.Changes {
		if c.Has(FlagProtected) {
			t.Errorf("%s %s: protected (%s)", c.Kind, c.Path, strings.Join(c.Obeys, "; "))
		}
	}
	if len(s.Changes) == 0 {
		t.Error("no changes")
	}
}

// What a coding agent does with git every day lands without approval: it
// is data git reads, never something it runs. Applied, it is the host's
// history.
func TestCaptureGitWork(t *testing.T) {
	e := newEnv(t)
	hostRepo(t, e.host)
	e.start()
	m, unmount := overlay(t, e)
	git(t, m, "config", "user.email", "agent@x")
	git(t, m, "status")
	write(t, m+"/a.txt", "a\n", 0o644)
	git(t, m, "add", "a.txt")
	git(t, m, "commit", "-qm", "add a")
	git(t, m, "branch", "feat")
	git(t, m, "mv", "a.txt", "b.txt")
	git(t, m, "commit", "-qm", "rename a")
	write(t, m+"/README", "changed\n", 0o644)
	git(t, m, "stash")
	git(t, m, "checkout", "-q", "-b", "topic", "feat")
	write(t, m+"/c.txt", "c\n", 0o644)
	git(t, m, "add", "c.txt")
	git(t, m, "commit", "-qm", "add c")
	git(t, m, "checkout", "-q", "main")
	git(t, m, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
	git(t, m, "tag", "-a", "-m", "one", "v1")
	git(t, m, "remote", "add", "origin", "https://example.com/r.git")
	git(t, m, "branch", "-q", "--set-upstream-to=feat")
	git(t, m, "pack-refs", "--all")
	tips := git(t, m, "rev-parse", "main", "topic", "v1")
	unmount()
	s := e.mustCapture(t)
	noneProtected(t, s)
	checkActivity(t, Git(s, e.state), strings.Fields(tips))

	rep, err := Apply(s, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Conflicts)+len(rep.Refused) > 0 {
		t.Fatalf("apply: %+v", rep)
	}
	if log := git(t, e.host, "log", "--oneline", "main"); !strings.Contains(log, "merge topic") || !strings.Contains(log, "rename a") {
		t.Errorf("the host's log after apply:\n%s", log)
	}
	git(t, e.host, "fsck", "--strict")
}

// A repository git init makes, as it makes it, lands without approval:
// sample hooks, description, info/exclude, HEAD naming a branch, and a
// configuration of the keys git init writes.
func TestCaptureGitInit(t *testing.T) {
	e := newEnv(t)
	write(t, e.host+"/README", "x\n", 0o644)
	write(t, e.host+"/sub/main.go", "package main\n", 0o644)
	e.start()
	m, unmount := overlay(t, e)
	git(t, m, "init", "-q")
	git(t, m+"/sub", "init", "-q", "-b", "trunk")
	unmount()
	s := e.mustCapture(t)
	noneProtected(t, s)
	var samples int
	for _, c := range s.Changes {
		if strings.HasPrefix(c.Path, ".git/hooks/") && strings.HasSuffix(c.Path, ".sample") {
			samples++
		}
	}
	if samples == 0 {
		t.Error("git init made no sample hooks: the test tests nothing")
	}
	a := Git(s, e.state)
	if a == nil || len(a.Repos) != 2 || !a.Repos[0].New || !a.Repos[1].New || a.Repos[1].Dir != "sub/.git" {
		t.Errorf("activity %+v, want two new repositories", a)
	}
}

// What git would run or obey stays held, and says why: each case weakens
// one rule.
func TestCaptureGitHeld(t *testing.T) {
	root(t)
	for _, tc := range []struct {
		name  string
		host  func(e *env) // after a repository is made at the host's root
		layer func(e *env)
		want  map[string]bool
		obeys map[string]string // a path's Obeys holds this
	}{
		{"fsmonitor", nil, func(e *env) {
			must(t, os.MkdirAll(e.upper+"/.git", 0o755))
			git(t, e.upper, "config", "--file", e.upper+"/.git/config", "core.fsmonitor", "touch pwned")
		}, map[string]bool{".git/config": true}, map[string]string{".git/config": "core.fsmonitor = touch pwned"}},
		{"a hook", nil, func(e *env) {
			write(t, e.upper+"/.git/hooks/pre-commit", "#!/bin/sh\n", 0o755)
			write(t, e.upper+"/.git/hooks/pre-push.sample", "#!/bin/sh\n", 0o755)
		}, map[string]bool{".git/hooks/pre-commit": true, ".git/hooks/pre-push.sample": false},
			map[string]string{".git/hooks/pre-commit": "the hook pre-commit"}},
		{"a hook removed", func(e *env) {
			write(t, e.host+"/.git/hooks/pre-commit", "#!/bin/sh\nscan-secrets\n", 0o755)
		}, func(e *env) {
			whiteoutAt(t, e.upper+"/.git/hooks/pre-commit")
		}, map[string]bool{".git/hooks/pre-commit": true}, nil},
		{"a hook in a subdirectory, a sample that is a link", nil, func(e *env) {
			write(t, e.upper+"/.git/hooks/x/pre-commit.sample", "#!/bin/sh\n", 0o755)
			must(t, os.Symlink("/bin/true", e.upper+"/.git/hooks/post-checkout.sample"))
		}, map[string]bool{".git/hooks/x/pre-commit.sample": true, ".git/hooks/post-checkout.sample": true}, nil},
		{"configuration git cannot read", nil, func(e *env) {
			write(t, e.upper+"/.git/config", "[core]\n\tbare = false\n\tfsmonitor = \"x\n", 0o644)
		}, map[string]bool{".git/config": true}, map[string]string{".git/config": "unterminated quote"}},
		{"include, alias, in another case and form", nil, func(e *env) {
			write(t, e.upper+"/.git/config", "[Include]\n\tPath = ../cfg\n[alias.X]\n\ty = z\n", 0o644)
		}, map[string]bool{".git/config": true}, map[string]string{".git/config": "include.path = ../cfg"}},
		{"safe keys, a key removed", func(e *env) {
			write(t, e.host+"/.git/config", "[core]\n\tbare = false\n\tpager = less\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/.git/config", "[core]\n\tbare = false\n[user]\n\tname = x\n[branch \"main\"]\n\tremote = origin\n", 0o644)
		}, map[string]bool{".git/config": false}, nil},
		{"a key as it was", func(e *env) {
			write(t, e.host+"/.git/config", "[core]\n\tpager = less\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/.git/config", "[core]\n\tpager = less\n[user]\n\tname = x\n", 0o644)
		}, map[string]bool{".git/config": false}, nil},
		{"a worktree's configuration", nil, func(e *env) {
			write(t, e.upper+"/.git/config.worktree", "[core]\n\tsshCommand = x\n", 0o644)
		}, map[string]bool{".git/config.worktree": true}, nil},
		{"attributes, alternates, a rebase's todo, modules, worktrees, commondir", nil, func(e *env) {
			write(t, e.upper+"/.git/info/attributes", "* filter=x\n", 0o644)
			write(t, e.upper+"/.git/info/exclude", "*.o\n", 0o644)
			write(t, e.upper+"/.git/objects/info/alternates", "/elsewhere\n", 0o644)
			write(t, e.upper+"/.git/rebase-merge/git-rebase-todo", "exec touch x\n", 0o644)
			write(t, e.upper+"/.git/modules/s/config", "[core]\n", 0o644)
			write(t, e.upper+"/.git/worktrees/w/gitdir", "/x\n", 0o644)
			write(t, e.upper+"/.git/commondir", "..\n", 0o644)
			write(t, e.upper+"/.git/index.lock", "", 0o644)
		}, map[string]bool{".git/info/attributes": true, ".git/info/exclude": false, ".git/objects/info/alternates": true,
			".git/rebase-merge/git-rebase-todo": true, ".git/modules/s/config": true, ".git/worktrees/w/gitdir": true,
			".git/commondir": true, ".git/index.lock": true}, nil},
		{"a link", nil, func(e *env) {
			must(t, os.MkdirAll(e.upper+"/.git/refs/heads", 0o755))
			must(t, os.Symlink("/etc/passwd", e.upper+"/.git/refs/heads/x"))
		}, map[string]bool{".git/refs/heads/x": true}, nil},
		{"HEAD removed", nil, func(e *env) {
			whiteoutAt(t, e.upper+"/.git/HEAD")
		}, map[string]bool{".git/HEAD": true}, nil},
		{"the root made a repository", nil, func(e *env) {
			write(t, e.upper+"/HEAD", "ref: refs/heads/main\n", 0o644)
			must(t, os.MkdirAll(e.upper+"/objects", 0o755))
			must(t, os.MkdirAll(e.upper+"/refs/heads", 0o755))
			write(t, e.upper+"/config", "[core]\n\tbare = false\n", 0o644)
		}, map[string]bool{"HEAD": true, "objects": true, "refs": true, "config": true}, nil},
		{"a directory not called .git made a repository", nil, func(e *env) {
			write(t, e.upper+"/src/HEAD", "ref: refs/heads/main\n", 0o644)
			must(t, os.MkdirAll(e.upper+"/src/objects", 0o755))
			must(t, os.MkdirAll(e.upper+"/src/refs/heads", 0o755))
		}, map[string]bool{"src/HEAD": true, "src/objects": true, "src/refs": true}, nil},
		{"a new .git whose HEAD is not a branch", nil, func(e *env) {
			write(t, e.upper+"/sub/.git/HEAD", "ref: refs/heads/../../x\n", 0o644)
			must(t, os.MkdirAll(e.upper+"/sub/.git/objects", 0o755))
			must(t, os.MkdirAll(e.upper+"/sub/.git/refs", 0o755))
			write(t, e.upper+"/new/.git/HEAD", "ref: refs/heads/main\n", 0o644)
		}, map[string]bool{"sub/.git/HEAD": true, "sub/.git/objects": false, "new/.git/HEAD": false}, nil},
		{"a .git file replaced by a repository", func(e *env) {
			write(t, e.host+"/mod/.git", "gitdir: ../.git/modules/mod\n", 0o644)
		}, func(e *env) {
			must(t, os.MkdirAll(e.upper+"/mod/.git/objects", 0o755))
			must(t, os.MkdirAll(e.upper+"/mod/.git/refs", 0o755))
			write(t, e.upper+"/mod/.git/HEAD", "ref: refs/heads/main\n", 0o644)
		}, map[string]bool{}, map[string]string{"mod/.git": "removed or replaced"}},
		{"a hooks path into the repository", func(e *env) {
			write(t, e.host+"/.git/config", "[core]\n\thooksPath = .git/objects/h\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/.git/objects/h/pre-commit", "#!/bin/sh\n", 0o755)
			write(t, e.upper+"/.git/objects/ab/cccccccccccccccccccccccccccccccccccccc", "x", 0o444)
		}, map[string]bool{".git/objects/h/pre-commit": true, ".git/objects/ab/cccccccccccccccccccccccccccccccccccccc": false}, nil},
		{"many variables held, a long value", nil, func(e *env) {
			var b strings.Builder
			b.WriteString("[alias]\n")
			for i := 0; i < 100; i++ {
				fmt.Fprintf(&b, "\ta%d = !%s\n", i, strings.Repeat("x", 1000))
			}
			write(t, e.upper+"/.git/config", b.String(), 0o644)
		}, map[string]bool{".git/config": true}, map[string]string{".git/config": "alias.a0 = !xxx"}},
		{"another tool's name inside a repository", nil, func(e *env) {
			write(t, e.upper+"/.git/refs/heads/mise.toml", "0123\n", 0o644)
		}, map[string]bool{".git/refs/heads/mise.toml": true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			hostRepo(t, e.host)
			if tc.host != nil {
				tc.host(e)
			}
			e.start()
			tc.layer(e)
			s := e.mustCapture(t)
			checkProtected(t, s, tc.want)
			for _, c := range s.Changes {
				if len(c.Obeys) > maxObeys || slices.ContainsFunc(c.Obeys, func(o string) bool { return len(o) > maxObeysLen+3 }) {
					t.Errorf("%s: obeys past its bounds (%d lines)", c.Path, len(c.Obeys))
				}
			}
			for p, want := range tc.obeys {
				i := slices.IndexFunc(s.Changes, func(c Change) bool { return c.Path == p })
				if i < 0 || !slices.ContainsFunc(s.Changes[i].Obeys, func(o string) bool { return strings.Contains(o, want) }) {
					t.Errorf("%s: obeys %q, want %q in it", p, s.Changes[max(i, 0)].Obeys, want)
				}
			}
		})
	}
}

// checkActivity checks what Git reads of the everyday work of
// TestCaptureGitWork: its commits, newest first, with their files and
// lines, and the refs moved to tips (main, topic, the tag v1).
func checkActivity(t *testing.T, a *GitActivity, tips []string) {
	t.Helper()
	if a == nil || len(a.Repos) != 1 || a.Repos[0].Dir != ".git" {
		t.Fatalf("activity %+v, want one repository", a)
	}
	r := a.Repos[0]
	var subjects []string
	files := map[string]string{}
	for _, c := range r.Commits {
		subjects = append(subjects, c.Subject)
		var fs []string
		for _, f := range c.Files {
			fs = append(fs, fmt.Sprintf("%s +%d -%d", f.Path, f.Added, f.Removed))
		}
		files[c.Subject] = strings.Join(fs, ", ")
		if c.FilesNote != "" {
			t.Errorf("%s: %s", c.Subject, c.FilesNote)
		}
	}
	if len(subjects) == 0 || subjects[0] != "merge topic" {
		t.Errorf("commits %q, want merge topic first", subjects)
	}
	for subject, want := range map[string]string{"add a": "a.txt +1 -0", "rename a": "a.txt +0 -1, b.txt +1 -0",
		"add c": "c.txt +1 -0", "merge topic": "c.txt +1 -0"} {
		if files[subject] != want {
			t.Errorf("%s: files %q, want %q", subject, files[subject], want)
		}
	}
	refs := map[string]GitRef{}
	for _, ref := range r.Refs {
		refs[ref.Name] = ref
	}
	if ref := refs["refs/heads/topic"]; ref.Old != "" || ref.New != tips[1] {
		t.Errorf("topic: %+v, want made at %s (all: %+v)", ref, tips[1], r.Refs)
	}
	if ref := refs["refs/heads/main"]; ref.Old == "" || ref.New != tips[0] {
		t.Errorf("main: %+v, want moved to %s", ref, tips[0])
	}
	if _, ok := refs["refs/tags/v1"]; !ok {
		t.Errorf("the tag v1 not listed: %+v", r.Refs)
	}
}
