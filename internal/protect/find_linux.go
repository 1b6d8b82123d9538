package protect

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openDir opens the directory p, not through a link at p.
func openDir(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openChild opens the directory name in dir (p by its path), never
// through a link; nil when it is gone or closed to cordon's user.
func openChild(dir *os.File, name, p string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
		return nil, nil
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// fileID is the identity (device, inode) and link count of name in dir (p
// by its path), not following a link; ok is false when it is gone.
func fileID(dir *os.File, name, p string) (id [2]uint64, nlink uint64, ok bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return id, 0, false, nil
		}
		return id, 0, false, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	return [2]uint64{st.Dev, st.Ino}, uint64(st.Nlink), true, nil
}
