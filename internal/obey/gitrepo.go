package obey

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// GitRepo is what JudgeGit needs to know of the git directory a change is
// in (see GitDir).
type GitRepo struct {
	// DotGit: the directory is called .git, a work tree's repository; not
	// one git would take by its structure alone (a bare repository, the
	// workspace's root made one).
	DotGit bool
	// Existing: the host's tree holds a repository there already.
	Existing bool
}

// GitVerdict is what JudgeGit makes of a change inside a git directory.
type GitVerdict int

// Verdicts.
const (
	// GitData lands: git reads it as data (objects, refs, logs, the
	// index), never as something to run or obey.
	GitData GitVerdict = iota
	// GitConfig is a configuration file: its variables decide
	// (GitConfigHeld).
	GitConfig
	// GitHead is the HEAD of a new .git: it lands when it names a branch
	// as git init writes it (GitHeadOK).
	GitHead
	// GitHeld is held: git runs or obeys it, or it is not among the data
	// cordon knows.
	GitHeld
)

// gitDataFiles are the files at the top of a git directory that git
// writes and reads as data: what a commit, merge, fetch or stash leaves.
var gitDataFiles = map[string]bool{
	"index": true, "ORIG_HEAD": true, "FETCH_HEAD": true, "MERGE_HEAD": true, "MERGE_MSG": true,
	"MERGE_MODE": true, "AUTO_MERGE": true, "CHERRY_PICK_HEAD": true, "REVERT_HEAD": true,
	"COMMIT_EDITMSG": true, "SQUASH_MSG": true, "TAG_EDITMSG": true, "packed-refs": true,
	"description": true, "shallow": true, "info/exclude": true, "info/refs": true,
}

// GitDataName reports whether name, at the top of a git directory, holds
// only its data as every commit, merge, fetch or checkout leaves it (HEAD
// included, and info, whose attributes GitWatch names apart): what else a
// run makes there (an interrupted rebase's commands) is worth a look.
func GitDataName(name string) bool {
	return gitDataFiles[name] || slices.Contains(gitDataDirs, name) ||
		name == "HEAD" || name == "info" || name == "branches" || name == "lfs"
}

// gitDataDirs are the directories of a git directory whose content is
// data, at any depth (but see gitHeldData).
var gitDataDirs = []string{"objects", "refs", "logs", "rr-cache"}

// InGitData reports whether rel, relative to a git directory, is one of
// its directories of data or inside one: one there that holds a HEAD
// (logs/HEAD, refs/remotes/origin/HEAD) is no repository git would take.
func InGitData(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	return slices.Contains(gitDataDirs, top)
}

// gitHeldData are paths under gitDataDirs that git obeys after all:
// alternates name other object stores to read.
var gitHeldData = map[string]string{
	"objects/info/alternates":      "alternates: other object stores git reads",
	"objects/info/http-alternates": "alternates: other object stores git reads",
}

// gitHeldWhy says why the paths of GitObeyed, and others git obeys, are
// held.
var gitHeldWhy = map[string]string{
	"info/attributes": "attributes: the filter and diff drivers git runs on files",
	"commondir":       "commondir: the repository git takes this one's data and configuration from",
	"gitdir":          "gitdir: where git takes this worktree's repository to be",
	"worktrees":       "a linked worktree's repository",
	"modules":         "a submodule's repository",
	"rebase-merge":    "a rebase in progress: its todo list runs exec lines on git rebase --continue",
	"rebase-apply":    "a rebase in progress",
	"sequencer":       "a cherry-pick or revert in progress: its todo list may run exec lines",
}

// JudgeGit says what a change at rel inside a git directory of repo is:
// rel is relative to the directory ("" for the directory itself); file
// and dir say its type (for a removal, the host's; both false: a link or a
// special file, which git never writes in a git directory); deleted that
// the host's is removed. why says, for a person, what git would do with what
// is held. The rules:
//
//   - objects, refs, logs, rr-cache and what is in them, and the files
//     commits, merges and stashes write (the index, ORIG_HEAD, packed-refs,
//     COMMIT_EDITMSG...), description and info/exclude: data;
//   - objects/info/alternates: held (other object stores to read);
//   - hooks: only NAME.sample files, which git never runs (it runs a hook
//     by its exact name, whatever the file's mode) land; any other file
//     there, added, changed or removed, is held;
//   - config and config.worktree: by their variables (GitConfigHeld);
//   - HEAD: data in a repository the host has; in a new one, only when the
//     directory is a .git and HEAD names a branch (GitHead); removed, held;
//   - objects and refs themselves, added to a directory that is not a .git
//     and was no repository: held (they make a repository of it);
//   - everything else (info/attributes, commondir, gitdir, worktrees,
//     modules, a rebase's todo list, any name cordon does not know): held.
func JudgeGit(repo GitRepo, rel string, file, dir, deleted bool) (GitVerdict, string) {
	if !file && !dir {
		return GitHeld, "a link or special file in a git directory"
	}
	if rel == "" {
		if deleted || !dir {
			return GitHeld, "a repository's directory removed or replaced"
		}
		return GitData, ""
	}
	top, rest, _ := strings.Cut(rel, "/")
	switch {
	case gitHeldData[rel] != "":
		return GitHeld, gitHeldData[rel]
	case (top == "objects" || top == "refs") && rest == "":
		if deleted || !dir {
			return GitHeld, top + " removed or replaced: this is no repository any more, and git looks for another"
		}
		if !repo.DotGit && !repo.Existing {
			return GitHeld, top + " makes a repository of a directory not called .git"
		}
		return GitData, ""
	case gitDataFiles[rel] && file:
		return GitData, ""
	case (top == "info" || top == "branches") && rest == "" && dir:
		// git init makes them; what is in them is judged.
		return GitData, ""
	case top == "hooks":
		switch {
		case rest == "" && dir:
			return GitData, ""
		case file && !strings.Contains(rest, "/") && strings.HasSuffix(rest, ".sample"):
			return GitData, ""
		}
		return GitHeld, "the hook " + rest
	case rel == "config" || rel == "config.worktree":
		if !file {
			return GitHeld, rel + " that is not a file"
		}
		return GitConfig, ""
	case rel == "HEAD":
		switch {
		case deleted:
			return GitHeld, "HEAD removed: this is no repository any more, and git looks for another"
		case !file:
			return GitHeld, "HEAD that is not a file"
		case repo.Existing:
			return GitData, ""
		case repo.DotGit:
			return GitHead, ""
		}
		return GitHeld, "HEAD makes a repository of a directory not called .git"
	}
	if slices.Contains(gitDataDirs, top) {
		if GitDataPath(rel, dir) {
			return GitData, ""
		}
		return GitHeld, "a name git does not give its data in " + top + "/ (a repository or hooks planted there would be obeyed, through a submodule's entry in the index): " + rel
	}
	if why := gitHeldWhy[top]; why != "" {
		return GitHeld, why
	}
	if why := gitHeldWhy[rel]; why != "" {
		return GitHeld, why
	}
	return GitHeld, "a file of a git directory that is not among the data cordon lets land: " + rel
}

// gitHeadRef is HEAD as git init and git checkout write it: a branch.
var gitHeadRef = lazyRegexp(`^ref: refs/heads/[A-Za-z0-9_][A-Za-z0-9._/-]{0,200}\n$`)

// GitHeadOK reports whether a new repository's HEAD is as git init writes
// it: "ref: refs/heads/NAME", NAME a plain branch name.
func GitHeadOK(content []byte) bool {
	s := string(content)
	if !gitHeadRef().MatchString(s) {
		return false
	}
	name := strings.TrimSuffix(strings.TrimPrefix(s, "ref: refs/heads/"), "\n")
	return !strings.Contains(name, "..") && !strings.Contains(name, "//") && !strings.Contains(name, "/.") &&
		!strings.HasSuffix(name, "/") && !strings.HasSuffix(name, ".lock") && !strings.HasSuffix(name, ".")
}

// MatchBeyondGit is Match without the entries that name git's own
// directories (.git, HEAD): for a path inside a git directory, which
// JudgeGit judges, whether another tool's entry names it too.
func MatchBeyondGit(rel string) *Entry {
	return match(rel, func(n string) bool { return n == ".git" || n == "HEAD" })
}

// GitDataPath reports whether rel, relative to a git directory and inside
// one of its directories of data (objects, refs, logs, rr-cache), is a
// name git gives its data there: a loose object or its fan-out directory,
// a pack and its companions, the commit graph and the multi-pack index;
// a reference's name (refs, and their logs); a rerere record. Anything
// else (a .git, a config, hooks: a repository git would use through a
// submodule's entry in the index) is not. dir says rel is a directory.
func GitDataPath(rel string, dir bool) bool {
	top, rest, _ := strings.Cut(rel, "/")
	if rest == "" {
		return dir && slices.Contains(gitDataDirs, top)
	}
	switch top {
	case "objects":
		if dir {
			return gitObjectDir().MatchString(rest)
		}
		return gitObjectFile().MatchString(rest)
	case "refs", "logs":
		for _, c := range strings.Split(rest, "/") {
			if !refComponent(c) {
				return false
			}
		}
		return true
	case "rr-cache":
		if dir {
			return gitHex().MatchString(rest)
		}
		return gitRerere().MatchString(rest)
	}
	return false
}

var (
	gitHex        = lazyRegexp(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	gitObjectDir  = lazyRegexp(`^([0-9a-f]{2}|pack|info|info/commit-graphs)$`)
	gitObjectFile = lazyRegexp(`^([0-9a-f]{2}/[0-9a-f]{38}([0-9a-f]{24})?` +
		`|pack/pack-[0-9a-f]{40,64}\.(pack|idx|rev|bitmap|keep|mtimes|promisor)` +
		`|pack/multi-pack-index(-[0-9a-f]{40,64}\.(bitmap|rev))?` +
		`|info/packs|info/commit-graph|info/commit-graphs/commit-graph-chain|info/commit-graphs/graph-[0-9a-f]{40,64}\.graph)$`)
	gitRerere = lazyRegexp(`^[0-9a-f]{40}([0-9a-f]{24})?/(preimage|postimage|thisimage)(\.[0-9]+)?$`)
)

// lazyRegexp compiles expr when first used: the processes that import
// this package without judging a git directory (every sandbox's init) do
// not pay for it.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// refComponent reports whether c is a component git allows in a
// reference's name (git check-ref-format): not empty, not starting with a
// dot, no "..", "@{", control character, space or any of ~^:?*[\, not
// ending with ".lock" or ".".
func refComponent(c string) bool {
	if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") || strings.HasSuffix(c, ".") ||
		strings.Contains(c, "..") || strings.Contains(c, "@{") {
		return false
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; b < 0x20 || b == 0x7f || strings.IndexByte(" ~^:?*[\\", b) >= 0 {
			return false
		}
	}
	return true
}
