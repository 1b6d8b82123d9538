package changes

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/obey"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// flagObeyed flags protected the changes the host's tools would run or
// obey, and says in Obeys what git would. The tree is judged as it will be
// once this set and every set still held for the workspace (pending) have
// landed.
//
// A change in no git directory is protected when the catalog names it
// (protect.Protected) or git's configuration leads to it (protect.Repos).
// Inside a directory that is, or is about to become, a git directory in
// that tree, whatever it is called (obey.GitDir: git obeys the
// configuration and hooks of a bare repository, or of one a planted file
// makes, as it does .git's), and in a .git that is one, obey.JudgeGit
// decides: the data a commit, merge or stash writes lands; a configuration
// is held by the variables it adds or changes outside the safe list; a
// HEAD lands in a repository the host has, or in a new .git as git init
// writes it; the rest is held. The catalog's other entries, and a hooks
// directory core.hooksPath names, are held inside a repository too.
func (c *capturer) flagObeyed(upper, host *os.File, pending map[string]bool) {
	type verdict struct {
		git, whole bool
		repo       obey.GitRepo
	}
	known := map[string]verdict{}
	has := func(rel string) bool { return pending[rel] || kindIn(upper, host, rel) != 0 }
	hostHas := func(dir, n string) bool { return statBeneath(host, path.Join(dir, n)) != nil }
	judge := func(dir string) verdict {
		v, ok := known[dir]
		if !ok {
			// git takes a HEAD of any kind (a link to refs/... too),
			// and finds objects and refs through links, or through the
			// directory a commondir file names.
			v.whole = has(path.Join(dir, "HEAD")) || has(path.Join(dir, "commondir"))
			v.git = v.whole || obey.GitDir(has, dir)
			v.repo.DotGit = path.Base(dir) == ".git"
			v.repo.Existing = hostHas(dir, "commondir") ||
				hostHas(dir, "HEAD") && hostHas(dir, "objects") && hostHas(dir, "refs")
			known[dir] = v
		}
		return v
	}
	// beyond reports what git obeys outside its repositories' own files,
	// and what is in a repository it uses that is no git directory (yet):
	// all of it, when gits is empty.
	beyond := func(rel string, gits []string) bool {
		for _, f := range c.beyond {
			if f(rel) {
				return true
			}
		}
		for _, r := range c.repos {
			if under(rel, r) && (len(gits) == 0 || !judge(r).git) {
				return true
			}
		}
		return false
	}
	hooks := c.hooksDirs(func(d string) bool { return judge(d).git })
	inHooks := func(rel string) bool {
		for p := rel; ; p = path.Dir(p) {
			if hooks[p] {
				return true
			}
			if p == "." {
				return false
			}
		}
	}
	for i := range c.changes {
		ch := &c.changes[i]
		if !ch.Has(FlagProtected) && inHooks(ch.Path) {
			ch.Flags = append(ch.Flags, FlagProtected)
			const why = "a hooks directory: core.hooksPath of a configuration this set writes names it"
			if c.obeysBytes+len(why) <= maxObeysTotal {
				c.obeysBytes += len(why)
				ch.Obeys = append(ch.Obeys, why)
			}
		}
		if !ch.Has(FlagProtected) {
			var gits []string
			for dir := path.Dir(ch.Path); ; dir = path.Dir(dir) {
				// Of a repository waiting for its HEAD (objects and
				// refs only), only its markers and what git would obey
				// once it is one are judged.
				if v := judge(dir); v.whole || v.git && waiting(dir, ch.Path) {
					gits = append(gits, dir)
				}
				if dir == "." {
					break
				}
			}
			if path.Base(ch.Path) == ".git" && judge(ch.Path).git {
				gits = append([]string{ch.Path}, gits...)
			}
			gits = outermost(gits)
			held := false
			if len(gits) == 0 {
				held = protect.Protected(ch.Path) || beyond(ch.Path, nil)
			} else {
				held = obey.MatchBeyondGit(ch.Path) != nil || beyond(ch.Path, gits)
				for _, g := range gits {
					why := c.judgeGit(host, g, judge(g).repo, ch)
					held = held || len(why) > 0
					for _, w := range why {
						if len(ch.Obeys) >= maxObeys || slices.Contains(ch.Obeys, w) {
							continue
						}
						if c.obeysBytes += len(w); c.obeysBytes > maxObeysTotal {
							w = "(more not shown)"
						}
						ch.Obeys = append(ch.Obeys, w)
						if w == "(more not shown)" {
							break
						}
					}
				}
			}
			// A link may stand in for a name of the catalog: what is
			// written through it later lands under the name it points to.
			held = held || ch.Type == TypeSymlink && ch.Kind != Deleted && obey.LinkMatch(ch.Path) != nil
			if held {
				ch.Flags = append(ch.Flags, FlagProtected)
			}
		}
		slices.Sort(ch.Flags)
	}
}

// hooksDirs are the places a core.hooksPath of a git configuration the
// set writes, in any git directory (judge), may name: git takes a relative
// one from where the hooks run, the work tree's top (the directory above
// the git directory, or wherever git runs with --git-dir: the workspace's
// root) or, in a bare repository, the git directory itself (isGit says
// which directories are git's). Each is held with what it holds,
// whatever the set does with the configuration.
func (c *capturer) hooksDirs(isGit func(string) bool) map[string]bool {
	out := map[string]bool{}
	for _, ch := range c.changes {
		base := path.Base(ch.Path)
		if ch.Type != TypeFile || ch.Kind == Deleted || (base != "config" && base != "config.worktree") {
			continue
		}
		dir := path.Dir(ch.Path)
		if path.Base(dir) == "worktrees" || path.Base(path.Dir(dir)) == "worktrees" {
			dir = path.Dir(path.Dir(dir)) // a work tree's config.worktree: its repository's
		}
		if !isGit(dir) || ch.Size > obey.MaxGitConfig {
			continue
		}
		data, err := readFile(filepath.Join(c.blobs.Name(), ch.SHA256), obey.MaxGitConfig)
		if err != nil {
			continue
		}
		keys, _ := obey.ParseGitConfig(data)
		for _, k := range keys {
			if !strings.EqualFold(k.Section, "core") || k.HasSub || !strings.EqualFold(k.Name, "hookspath") || k.NoValue {
				continue
			}
			v := k.Value
			if path.IsAbs(v) || strings.HasPrefix(v, "~") {
				continue // outside the workspace, or found by protect.Repos
			}
			for _, from := range []string{".", dir, path.Dir(dir)} {
				if p := path.Join(from, v); p != ".." && !strings.HasPrefix(p, "../") {
					out[p] = true
				}
			}
			if len(out) > maxHooksDirs {
				return out
			}
		}
	}
	return out
}

// maxHooksDirs bounds the places hooksDirs holds.
const maxHooksDirs = 1024

// outermost drops from gits (innermost first) the directories inside
// another's data (obey.InGitData): .git/logs holds a HEAD, and is no
// repository for it.
func outermost(gits []string) []string {
	out := gits[:0]
	for i, g := range gits {
		inData := false
		for _, outer := range gits[i+1:] {
			rel := strings.TrimPrefix(g, outer+"/")
			if outer == "." {
				rel = g
			}
			if obey.InGitData(rel) {
				inData = true
				break
			}
		}
		if !inData {
			out = append(out, g)
		}
	}
	return out
}

// waiting reports whether rel, inside dir, is what a repository waiting
// for its HEAD at dir would obey once it has one, or one of its markers.
func waiting(dir, rel string) bool {
	inside := strings.TrimPrefix(rel, dir+"/")
	if dir == "." {
		inside = rel
	}
	return obey.IsGitObeyed(inside) || slices.Contains(obey.GitMarkers, inside)
}

// Bounds of what Obeys holds: lines of a change, bytes of a line, bytes
// of the set's in all.
const (
	maxObeys      = 32
	maxObeysLen   = 512
	maxObeysTotal = 4 << 20
)

// judgeGit says why git would run or obey ch, a change inside the git
// directory dir of repo (or dir itself), as obey.JudgeGit has it; nothing
// when it is data. A configuration is read from the set's blobs and the
// host's tree.
func (c *capturer) judgeGit(host *os.File, dir string, repo obey.GitRepo, ch *Change) []string {
	inside := ""
	if ch.Path != dir {
		inside = strings.TrimPrefix(ch.Path, dir+"/")
		if dir == "." {
			inside = ch.Path
		}
	}
	v, why := obey.JudgeGit(repo, inside, ch.Type == TypeFile, ch.Type == TypeDir, ch.Kind == Deleted)
	switch v {
	case obey.GitData:
		return nil
	case obey.GitHead:
		data, err := readFile(filepath.Join(c.blobs.Name(), ch.SHA256), 4096)
		if err == nil && obey.GitHeadOK(data) {
			return nil
		}
		return []string{"HEAD of a new repository that does not name a branch as git init writes it"}
	case obey.GitConfig:
		var old, new []byte
		if ch.Kind != Deleted {
			if ch.Size > obey.MaxGitConfig {
				return []string{fmt.Sprintf("%s: larger than %d bytes, not read", inside, obey.MaxGitConfig)}
			}
			var err error
			if new, err = readFile(filepath.Join(c.blobs.Name(), ch.SHA256), obey.MaxGitConfig); err != nil {
				return []string{fmt.Sprintf("%s: %v", inside, err)}
			}
		}
		if ch.OldSHA256 != "" {
			old = hostSmall(host, ch.Path, ch.OldSHA256, obey.MaxGitConfig)
		}
		keys, err := obey.GitConfigHeld(old, new)
		if err != nil {
			return []string{clip(inside + ": " + err.Error())}
		}
		for i, k := range keys {
			keys[i] = clip(k)
		}
		return keys
	}
	return []string{why}
}

// clip bounds a line of Obeys.
func clip(s string) string {
	if len(s) > maxObeysLen {
		return s[:maxObeysLen] + "..."
	}
	return s
}

// kindIn is the file type of rel in the sandbox's view, as near as the
// layer and the host's tree tell without merging them: the layer's entry
// when it has one (a whiteout: none), else the host's; 0 for none. Only
// ever used to flag more.
func kindIn(upper, host *os.File, rel string) uint32 {
	if st := statBeneath(upper, rel); st != nil {
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			return 0
		}
		return st.Mode & unix.S_IFMT
	}
	if st := statBeneath(host, rel); st != nil {
		return st.Mode & unix.S_IFMT
	}
	return 0
}

// statBeneath stats rel under d, reached without links and without
// leaving d; nil when there is nothing there.
func statBeneath(d *os.File, rel string) *unix.Stat_t {
	f, err := openBeneath(d, rel, unix.O_PATH, resolveBeneath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	return &st
}

// pendingPaths are the paths that the change sets still held for
// workspace in dir (all but skip) add or modify and have not landed: the
// tree a set is judged against is the host's with these. A set that does
// not load adds nothing (it cannot be applied either).
func pendingPaths(dir, workspace, skip string) map[string]bool {
	out := map[string]bool{}
	sets, _, _ := List(dir)
	for _, s := range sets {
		if s.Workspace != workspace || s.Run == skip {
			continue
		}
		applied := map[string]bool{}
		for _, a := range s.Applied {
			applied[a] = true
		}
		for _, ch := range s.Changes {
			if ch.Kind != Deleted && !applied[ch.Path] {
				out[ch.Path] = true
			}
		}
	}
	return out
}
