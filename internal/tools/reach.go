package tools

import (
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/text/unicode/norm"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

// A label rule names files, not a tool's argument: a command run in a
// sandbox reads whatever its view holds, whichever tool the rule was
// written for. reach finds which rules name a file the view holds in its
// workspace, so that the command's results carry their labels.

// maxReach bounds the entries reach looks at: past it, every rule not
// found yet counts as found (what was not looked at may be there).
var maxReach = 200000

// maxReachTime bounds the time reach takes, as maxReach its entries.
const maxReachTime = 2 * time.Second

// reach walks the workspace ws (never following a link: a link is an entry
// of its own, and what it leads to is met under its own name if it is in
// the workspace) and returns the index of every rule that names an entry,
// and whether the walk saw everything.
func reach(ws string, rules []pathglob.Rule) (found []int, complete bool) {
	found, _, _, complete = reachAll(ws, nil, rules, nil)
	return found, complete
}

// ID is a file's identity: its device and inode.
type ID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// maxMatched bounds the files reachAll names.
const maxMatched = 64

// reachAll is reach that also looks for files by identity (ids: files
// labelled by what was written to them, under whatever name they have
// now), and returns the index of each id found, and the files the rules
// named (at most maxMatched), whose identity keeps their labels when they
// are renamed.
//
// The workspace and the other roots are walked; an empty file and a
// directory are nothing to read (a directory's files are met on their
// own), so no rule or identity is found by them: cordon's placeholders
// of protected names, another sandbox's included, are such.
func reachAll(ws string, roots []string, rules []pathglob.Rule, ids []ID) (found, foundIDs []int, matched []File, complete bool) {
	if len(rules) == 0 && len(ids) == 0 {
		return nil, nil, nil, true
	}
	byID := map[ID]int{}
	for i, id := range ids {
		byID[id] = i
	}
	hitID := make([]bool, len(ids))
	nfc := make([]pathglob.Rule, len(rules))
	for i, r := range rules {
		nfc[i] = r.NFC()
	}
	wsNFC := norm.NFC.String(ws)
	hit := make([]bool, len(rules))
	walked := []string{ws}
	for _, r := range roots {
		if r != ws {
			walked = append(walked, r)
		}
	}
	complete = walkView(walked, maxReach, time.Now().Add(maxReachTime), false, func(p string, st *unix.Stat_t) bool {
		if empty(st) {
			return true
		}
		if i, ok := byID[ID{Dev: uint64(st.Dev), Ino: st.Ino}]; ok {
			hitID[i] = true
		}
		pn := norm.NFC.String(p)
		for i, r := range nfc {
			if r.MatchNFC(pn, wsNFC) {
				hit[i] = true
				if len(matched) < maxMatched {
					matched = append(matched, fileOf(p, st))
				}
			}
		}
		return true
	})
	for i, h := range hit {
		if h || !complete {
			found = append(found, i)
		}
	}
	for i, h := range hitID {
		if h || !complete {
			foundIDs = append(foundIDs, i)
		}
	}
	return found, foundIDs, matched, complete
}

// present returns the index of each of paths that names a file with
// something to read (not a directory, not an empty file), never
// following a link but as a link.
func present(paths []string) []int {
	var out []int
	for i, p := range paths {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR || empty(&st) {
			continue
		}
		out = append(out, i)
	}
	return out
}
