package tools

import (
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
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
	hidden := wire.ReadPlaceholders()
	seen := 0
	complete = true
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				// A root that is not there holds no change; anything
				// else not read may.
				if p != root || !errors.Is(err, fs.ErrNotExist) {
					complete = false
				}
				return nil
			}
			if seen++; seen > maxChanged {
				complete = false
				return filepath.SkipAll
			}
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil {
				complete = false
				return nil
			}
			if hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}] {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			if !time.Unix(st.Ctim.Unix()).Before(since) {
				files = append(files, File{Path: p, Exists: true, Dev: uint64(st.Dev), Ino: st.Ino, Links: uint64(st.Nlink)})
				if len(files) >= max {
					complete = false
					return filepath.SkipAll
				}
			}
			return nil
		})
	}
	return files, complete
}

// ChangedSince is the changed mode's answer for roots (absolute paths):
// for a caller in the same view.
func ChangedSince(roots []string, since time.Time, max int) ([]File, bool) {
	return changedSince(roots, since, min(max, MaxChangedFiles))
}
