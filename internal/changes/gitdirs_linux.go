package changes

import (
	"path"
	"slices"
	"strings"

	"os"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/obey"
)

// flagGitDirs flags protected the changes inside a directory that is, or
// is about to become, a git directory in the tree as it will be once this
// set and every set still held for the workspace (pending) have landed,
// whatever the directory is called (obey.GitDir): git obeys the
// configuration and hooks of a bare repository, or of one a planted file
// makes, as it does .git's. Where a HEAD or a commondir is there, every
// change inside is flagged; where only objects and refs are (a repository
// waiting for its HEAD, perhaps from another set), the files git obeys
// and the markers themselves.
func (c *capturer) flagGitDirs(upper, host *os.File, pending map[string]bool) {
	type verdict struct{ git, whole bool }
	known := map[string]verdict{}
	has := func(rel string) bool { return pending[rel] || kindIn(upper, host, rel) != 0 }
	judge := func(dir string) verdict {
		v, ok := known[dir]
		if !ok {
			// git takes a HEAD of any kind (a link to refs/... too),
			// and finds objects and refs through links, or through the
			// directory a commondir file names.
			v.whole = has(path.Join(dir, "HEAD")) || has(path.Join(dir, "commondir"))
			v.git = v.whole || obey.GitDir(has, dir)
			known[dir] = v
		}
		return v
	}
	for i := range c.changes {
		ch := &c.changes[i]
		if ch.Has(FlagProtected) {
			continue
		}
		for dir := path.Dir(ch.Path); ; dir = path.Dir(dir) {
			if v := judge(dir); v.git {
				inside := strings.TrimPrefix(ch.Path, dir+"/")
				if dir == "." {
					inside = ch.Path
				}
				if v.whole || obey.IsGitObeyed(inside) || slices.Contains(obey.GitMarkers, inside) {
					ch.Flags = append(ch.Flags, FlagProtected)
					slices.Sort(ch.Flags)
					break
				}
			}
			if dir == "." {
				break
			}
		}
	}
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
