package hostfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// open opens path for reading without following any symbolic link and
// without waiting on a FIFO (O_NONBLOCK: regular() refuses it next).
func open(path string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: resolveErr(err)}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func resolveErr(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return ErrSymlink
	}
	return err
}

func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// Target is a file cordon will write, its directory opened (and so pinned)
// in advance: open it before a sandbox starts, write it after.
type Target struct {
	dir  *os.File
	name string
	path string
}

// Prepare opens the directory of path without following any symbolic link
// and checks that whatever is at path now is a regular file with one name,
// or nothing.
func Prepare(path string) (*Target, error) {
	if weak() { // test builds only
		return &Target{path: path}, nil
	}
	dir, name := filepath.Split(path)
	if name == "" || name == "." || name == ".." {
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("not a file name")}
	}
	if dir == "" {
		dir = "."
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: resolveErr(err)}
	}
	t := &Target{dir: os.NewFile(uintptr(fd), dir), name: name, path: path}
	if err := t.check(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Close releases the directory.
func (t *Target) Close() error {
	if t.dir == nil {
		return nil
	}
	return t.dir.Close()
}

// Path is the path the target was prepared for.
func (t *Target) Path() string { return t.path }

// check refuses a link, a special file or a hard link at the target.
func (t *Target) check() error {
	var st unix.Stat_t
	err := unix.Fstatat(int(t.dir.Fd()), t.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return &os.PathError{Op: "stat", Path: t.path, Err: err}
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return &os.PathError{Op: "open", Path: t.path, Err: ErrSymlink}
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &os.PathError{Op: "open", Path: t.path, Err: ErrNotFile}
	case st.Nlink > 1:
		return &os.PathError{Op: "open", Path: t.path, Err: ErrHardLink}
	}
	return nil
}

// Write replaces the target with a new file holding data: written to a
// new name in the same directory, synced, then renamed over the target, so
// that no existing file is written through and a reader never sees half.
func (t *Target) Write(data []byte, perm os.FileMode) error {
	if weak() { // test builds only
		return os.WriteFile(t.path, data, perm)
	}
	if err := t.check(); err != nil {
		return err
	}
	dfd := int(t.dir.Fd())
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = fmt.Sprintf(".%s.cordon-%d-%d", t.name, os.Getpid(), i)
		var err error
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || i > 100 {
			return &os.PathError{Op: "create", Path: filepath.Join(filepath.Dir(t.path), tmp), Err: err}
		}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, t.name)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return &os.PathError{Op: "write", Path: t.path, Err: err}
	}
	return nil
}
