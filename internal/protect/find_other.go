//go:build !linux

package protect

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// openDir opens the directory p, not through a link at p (checked, then
// opened: sandboxes run on Linux only).
func openDir(p string) (*os.File, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &os.PathError{Op: "open", Path: p, Err: errors.New("not a directory")}
	}
	return os.Open(p)
}

// openChild opens the directory name in dir (p by its path); nil when it
// is gone or closed to cordon's user.
func openChild(dir *os.File, name, p string) (*os.File, error) {
	f, err := openDir(filepath.Join(dir.Name(), name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil, nil
	}
	return f, err
}

// fileID knows no file's identity here: other names of a file are not
// found.
func fileID(dir *os.File, name, p string) (id [2]uint64, nlink uint64, ok bool, err error) {
	return id, 0, false, nil
}

// InCached is In: without Linux, no cache is kept.
func (s Search) InCached(root, file string) ([]Found, error) { return s.In(root) }
