package tools

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// A label rule names files, not a tool's argument: a command run in a
// sandbox reads whatever its view holds, whichever tool the rule was
// written for. reach finds which rules name a file the view holds in its
// workspace, so that the command's results carry their labels.

// maxReach bounds the entries reach looks at: past it, every rule not
// found yet counts as found (what was not looked at may be there).
var maxReach = 200000

// reach walks the workspace ws (never following a link: a link is an entry
// of its own, and what it leads to is met under its own name if it is in
// the workspace) and returns the index of every rule that names an entry,
// and whether the walk saw everything.
func reach(ws string, rules []pathglob.Rule) (found []int, complete bool) {
	if len(rules) == 0 {
		return nil, true
	}
	// cordon's placeholders (of protected names, see listFiles) are
	// cordon's, not the workspace's files.
	hidden := wire.ReadPlaceholders()
	hit := make([]bool, len(rules))
	left, seen := len(rules), 0
	complete = true
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != ws {
				complete = false // a directory that cannot be read
			}
			return nil
		}
		if seen++; seen > maxReach {
			complete = false
			return filepath.SkipAll
		}
		if len(hidden) > 0 {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}] {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		for i, r := range rules {
			if !hit[i] && pathglob.MatchRule(r, p, ws) {
				hit[i] = true
				left--
			}
		}
		if left == 0 {
			return filepath.SkipAll
		}
		return nil
	})
	for i, h := range hit {
		if h || !complete {
			found = append(found, i)
		}
	}
	return found, complete
}
