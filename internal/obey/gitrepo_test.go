package obey

import "testing"

func TestJudgeGit(t *testing.T) {
	existing, fresh, planted := GitRepo{DotGit: true, Existing: true}, GitRepo{DotGit: true}, GitRepo{}
	const (
		file = iota
		dir
		link
	)
	for _, tc := range []struct {
		repo    GitRepo
		rel     string
		typ     int
		deleted bool
		want    GitVerdict
	}{
		{existing, "objects/ab/cccccccccccccccccccccccccccccccccccccc", file, false, GitData},
		{existing, "objects/ab", dir, false, GitData},
		{existing, "objects/pack/pack-dddddddddddddddddddddddddddddddddddddddd.pack", file, false, GitData},
		{existing, "objects/ab/cccccccccccccccccccccccccccccccccccccc", file, true, GitData},
		{existing, "refs/heads/main", file, false, GitData},
		{existing, "refs/heads/old", file, true, GitData},
		{existing, "logs/HEAD", file, false, GitData},
		{existing, "logs/refs/stash", file, false, GitData},
		{existing, "index", file, false, GitData},
		// A repository, or anything not git's data, planted among the data
		// (a submodule's entry in the index would make git use it).
		{existing, "refs/x/.git/config", file, false, GitHeld},
		{existing, "refs/x/.git", dir, false, GitHeld},
		{existing, "refs/x/config.lock", file, false, GitHeld},
		{existing, "logs/x/.git/hooks/pre-commit", file, false, GitHeld},
		{existing, "objects/x/.git/HEAD", file, false, GitHeld},
		{existing, "objects/ab/hooks", dir, false, GitHeld},
		{existing, "rr-cache/x/config", file, false, GitHeld},
		{existing, "rr-cache/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee/preimage", file, false, GitData},
		{existing, "objects/info/commit-graph", file, false, GitData},
		{existing, "refs/heads/feature/x", file, false, GitData},
		{existing, "ORIG_HEAD", file, false, GitData},
		{existing, "COMMIT_EDITMSG", file, false, GitData},
		{existing, "packed-refs", file, false, GitData},
		{existing, "MERGE_HEAD", file, true, GitData},
		{existing, "info/exclude", file, false, GitData},
		{existing, "info", dir, false, GitData},
		{existing, "HEAD", file, false, GitData},
		{existing, "", dir, false, GitData},
		{fresh, "HEAD", file, false, GitHead},
		{fresh, "objects", dir, false, GitData},
		{fresh, "hooks", dir, false, GitData},
		{fresh, "hooks/pre-commit.sample", file, false, GitData},
		{fresh, "description", file, false, GitData},
		{fresh, "branches", dir, false, GitData},
		{fresh, "branches/origin", file, false, GitHeld},
		{existing, "config", file, false, GitConfig},
		{existing, "config.worktree", file, false, GitConfig},
		{existing, "config", file, true, GitConfig},

		{existing, "HEAD", file, true, GitHeld},
		{existing, "HEAD", link, false, GitHeld},
		{existing, "objects", dir, true, GitHeld},
		{existing, "refs", file, false, GitHeld},
		{existing, "objects/ab/cccccccccccccccccccccccccccccccccccccc", link, false, GitHeld},
		{existing, "objects/info/alternates", file, false, GitHeld},
		{existing, "hooks/pre-commit", file, false, GitHeld},
		{existing, "hooks/pre-commit", file, true, GitHeld},
		{existing, "hooks/x/pre-commit.sample", file, false, GitHeld},
		{existing, "hooks/pre-commit.sample", link, false, GitHeld},
		{existing, "hooks/pre-commit.sample", dir, false, GitHeld},
		{existing, "config", dir, false, GitHeld},
		{existing, "info/attributes", file, false, GitHeld},
		{existing, "commondir", file, false, GitHeld},
		{existing, "gitdir", file, false, GitHeld},
		{existing, "worktrees/x/HEAD", file, false, GitHeld},
		{existing, "modules/sub/config", file, false, GitHeld},
		{existing, "rebase-merge/git-rebase-todo", file, false, GitHeld},
		{existing, "sequencer/todo", file, false, GitHeld},
		{existing, "index.lock", file, false, GitHeld},
		{existing, "index", dir, false, GitHeld},
		{existing, "", dir, true, GitHeld},
		{existing, "", file, false, GitHeld},
		{planted, "HEAD", file, false, GitHeld},
		{planted, "objects", dir, false, GitHeld},
		{planted, "refs", dir, false, GitHeld},
		{GitRepo{Existing: true}, "HEAD", file, false, GitData},
		{GitRepo{Existing: true}, "objects", dir, false, GitData},
	} {
		got, why := JudgeGit(tc.repo, tc.rel, tc.typ == file, tc.typ == dir, tc.deleted)
		if got != tc.want {
			t.Errorf("%+v %q type %d deleted %v: %d (%s), want %d", tc.repo, tc.rel, tc.typ, tc.deleted, got, why, tc.want)
		}
		if (got == GitHeld) != (why != "") {
			t.Errorf("%q: verdict %d with why %q", tc.rel, got, why)
		}
	}
}

func TestGitHeadOK(t *testing.T) {
	for s, want := range map[string]bool{
		"ref: refs/heads/main\n":                     true,
		"ref: refs/heads/feat/x-1.2\n":               true,
		"ref: refs/heads/main":                       false,
		"ref: refs/tags/v1\n":                        false,
		"ref: refs/heads/../x\n":                     false,
		"ref: refs/heads/a/.b\n":                     false,
		"ref: refs/heads/x.lock\n":                   false,
		"ref: refs/heads/x\n\n":                      false,
		"ref:  refs/heads/x\n":                       false,
		"0123456789012345678901234567890123456789\n": false,
		"": false,
	} {
		if GitHeadOK([]byte(s)) != want {
			t.Errorf("%q: ok %v, want %v", s, !want, want)
		}
	}
}

// Inside a git directory, the catalog's other entries still name what
// they name; git's own names are JudgeGit's.
func TestMatchBeyondGit(t *testing.T) {
	for rel, want := range map[string]bool{
		".git/objects/ab/cd":    false,
		".git/HEAD":             false,
		"sub/.git/refs/heads/x": false,
		".vscode/r/.git/config": true,
		".git/refs/heads/mise":  true,
		".git/objects/x/zz.pth": true,
		".git/hooks/.cordon/x":  true,
	} {
		if got := MatchBeyondGit(rel) != nil; got != want {
			t.Errorf("%s: matched %v, want %v", rel, got, want)
		}
	}
}

func TestInGitData(t *testing.T) {
	for rel, want := range map[string]bool{"logs": true, "refs/remotes/origin": true, "objects/x": true,
		"modules/s": false, "worktrees/w": false, "hooks": false, "": false} {
		if InGitData(rel) != want {
			t.Errorf("%q: %v, want %v", rel, !want, want)
		}
	}
}
