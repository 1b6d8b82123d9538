//go:build !linux

package hostfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// open opens path for reading after checking that no component of it is a
// symbolic link (racy where openat2 is missing; cordon runs no sandbox
// there).
func open(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	for p := abs; p != filepath.Dir(p); p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, &os.PathError{Op: "open", Path: path, Err: ErrSymlink}
		}
	}
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// Target is a file cordon will write.
type Target struct{ path string }

// Prepare checks path as far as this system allows.
func Prepare(path string) (*Target, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, &os.PathError{Op: "open", Path: path, Err: ErrSymlink}
		}
		if !fi.Mode().IsRegular() {
			return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotFile}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &Target{path: path}, nil
}

// Close releases nothing here.
func (t *Target) Close() error { return nil }

// Path is the path the target was prepared for.
func (t *Target) Path() string { return t.path }

// Write replaces the target by renaming a new file over it.
func (t *Target) Write(data []byte, perm os.FileMode) error {
	tmp := filepath.Join(filepath.Dir(t.path), "."+filepath.Base(t.path)+".cordon-tmp")
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, t.path)
}
