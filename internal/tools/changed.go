package tools

import (
	"time"

	"golang.org/x/sys/unix"
)

// A tool server that walks a path by name may be led to write another
// file than the one decided, in a directory it may write (a name swapped
// for a link and back while it runs). The file it wrote then has a
// change time from the call: changedSince finds such files, so that the
// gateway can withhold the result and label them.

// maxChanged bounds the entries changedSince looks at.
const maxChanged = 100000

// MaxChangedFiles bounds the files changedSince names.
const MaxChangedFiles = 4096

// changedSince returns the files (not directories) under roots whose
// change time is since or later, at most max of them, never following a
// link, and whether it looked at everything: the walk stops past
// maxChanged entries, or max files.
func changedSince(roots []string, since time.Time, max int) (files []File, complete bool) {
	complete = walkView(roots, maxChanged, time.Time{}, true, func(p string, st *unix.Stat_t) bool {
		if !time.Unix(st.Ctim.Unix()).Before(since) {
			files = append(files, fileOf(p, st))
		}
		return len(files) < max
	})
	return files, complete
}

// ChangedSince is the changed mode's answer for roots (absolute paths):
// for a caller in the same view.
func ChangedSince(roots []string, since time.Time, max int) ([]File, bool) {
	return changedSince(roots, since, min(max, MaxChangedFiles))
}
