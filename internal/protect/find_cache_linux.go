package protect

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// searchCache is what a Search found in a tree, with the inode and change
// time of every directory it read or could not open: while none of them
// moved, no name in the tree came or went, and what was found stands.
// A cache, trusted only where no sandbox reaches.
type searchCache struct {
	Root     string
	Dev, Ino uint64
	Key      string // the Search's settings
	Dirs     map[string]dirMark
	Found    []Found
}

// InCached is In, answered from the cache in file when no directory of
// the tree changed since it was written (a stat of each directory instead
// of a read of each name), and written to it otherwise. A tree whose
// directories change often, as a workspace's do, is better served by the
// look's index (SensitiveIn). file "" keeps no cache.
func (s Search) InCached(root, file string) ([]Found, error) {
	root = filepath.Clean(root)
	var rootSt unix.Stat_t
	if file == "" || unix.Stat(root, &rootSt) != nil {
		return s.In(root)
	}
	key := fmt.Sprintf("%d %d %t %t %q", s.MaxEntries, s.MaxDepth, s.StoresOnly, s.SameFiles, s.Homes)
	if c := loadSearchCache(file); c != nil && c.Root == root && c.Key == key && c.Dev == rootSt.Dev && c.Ino == rootSt.Ino && c.fresh(root) {
		return c.Found, nil
	}
	c := &searchCache{Root: root, Dev: rootSt.Dev, Ino: rootSt.Ino, Key: key, Dirs: map[string]dirMark{}}
	mark := func(rel string, st *unix.Stat_t) { c.Dirs[rel] = dirMark{Ino: st.Ino, Ctime: st.Ctim.Nano()} }
	found, err := s.in(root, func(rel string, f *os.File) {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil {
			mark(rel, &st)
		}
	}, func(rel string, parent *os.File, name string) {
		// Closed to cordon now: opened up, its change time moves.
		var st unix.Stat_t
		if unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			mark(rel, &st)
		}
	})
	if err != nil {
		return nil, err
	}
	c.Found = found
	saveFile(file, c)
	return found, nil
}

// fresh reports whether every directory c knows of root is as it was.
func (c *searchCache) fresh(root string) bool {
	for rel, mk := range c.Dirs {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(root, rel), &st) != nil || st.Ino != mk.Ino || st.Ctim.Nano() != mk.Ctime {
			return false
		}
	}
	return true
}

func loadSearchCache(file string) *searchCache {
	var c searchCache
	if !loadFile(file, &c) {
		return nil
	}
	return &c
}
