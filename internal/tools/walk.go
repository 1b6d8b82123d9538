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

// walkView calls fn for each entry under roots, as the sandbox sees them,
// that is not a directory nor one of cordon's placeholders (of protected
// names, see listFiles: cordon's, not the workspace's), never following
// a link. It stops past max entries, after deadline (zero: none), or when
// fn returns false, and says whether it looked at everything. A directory
// under a root that cannot be read leaves it incomplete; so do, when
// strict, a root that cannot be read (one that is not there holds
// nothing) and an entry gone or unreadable between its listing and its
// look, which otherwise are passed over.
func walkView(roots []string, max int, deadline time.Time, strict bool, fn func(p string, st *unix.Stat_t) bool) (complete bool) {
	hidden := wire.ReadPlaceholders()
	seen := 0
	complete = true
	for _, root := range roots {
		if !complete {
			break
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p != root || strict && !errors.Is(err, fs.ErrNotExist) {
					complete = false
				}
				return nil
			}
			if seen++; seen > max || !deadline.IsZero() && seen%1024 == 0 && time.Now().After(deadline) {
				complete = false
				return filepath.SkipAll
			}
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil {
				if strict {
					complete = false
				}
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
			if !fn(p, &st) {
				complete = false
				return filepath.SkipAll
			}
			return nil
		})
	}
	return complete
}

// fileOf is the File an entry's look found.
func fileOf(p string, st *unix.Stat_t) File {
	return File{Path: p, Exists: true, Dev: uint64(st.Dev), Ino: st.Ino, Links: uint64(st.Nlink)}
}

// empty reports whether st is of an empty regular file: nothing to read.
func empty(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0
}
