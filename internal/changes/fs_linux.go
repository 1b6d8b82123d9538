package changes

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const noFollow = unix.O_NOFOLLOW

// resolveBeneath is how every host path is reached from the workspace's
// root: no link followed, nothing outside.
//
// Nor across a mount: the sandbox's view of the workspace has no mounts
// under it, so a mount point it removed must not lead cordon into what is
// mounted there.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openRoot opens the directory at abs (a host workspace) for reading,
// following no link on the way.
func openRoot(abs string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, abs, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: abs, Err: err}
	}
	return os.NewFile(uintptr(fd), abs), nil
}

// openBeneath opens rel under the directory d with flags (O_NOFOLLOW and
// O_CLOEXEC added), resolving with resolve.
func openBeneath(d *os.File, rel string, flags uint64, resolve uint64) (*os.File, error) {
	fd, err := unix.Openat2(int(d.Fd()), rel, &unix.OpenHow{Flags: flags | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// openDirAt opens the directory name in d for reading, never a link.
func openDirAt(d *os.File, name string) (*os.File, error) {
	return openBeneath(d, name, unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
}

// openFileAt opens the regular file name in d for reading, never a link,
// and never waiting (on a FIFO swapped in); anything but a regular file is
// refused.
func openFileAt(d *os.File, name string) (*os.File, *unix.Stat_t, error) {
	f, err := openBeneath(d, name, unix.O_RDONLY|unix.O_NONBLOCK, resolveBeneath)
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, nil, fmt.Errorf("not a regular file")
	}
	return f, &st, nil
}

// lstatAt is fstatat(d, name) without following a link; st is nil when
// name does not exist.
func lstatAt(d *os.File, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// readlinkAt reads the link name in d, refusing text longer than maxPath.
func readlinkAt(d *os.File, name string) (string, error) {
	buf := make([]byte, maxPath+1)
	n, err := unix.Readlinkat(int(d.Fd()), name, buf)
	if err != nil {
		return "", err
	}
	if n > maxPath {
		return "", fmt.Errorf("link text longer than %d bytes", maxPath)
	}
	return string(buf[:n]), nil
}

// typeOf names the type of a stat's mode.
func typeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return TypeFile
	case unix.S_IFDIR:
		return TypeDir
	case unix.S_IFLNK:
		return TypeSymlink
	}
	return TypeSpecial
}

// whiteout reports whether st is an overlay whiteout: a character device
// 0:0.
func whiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// statOf is the Stat of st.
func statOf(st *unix.Stat_t) *Stat {
	return &Stat{
		Type:    typeOf(st.Mode),
		Mode:    st.Mode & 07777,
		Size:    st.Size,
		Ino:     st.Ino,
		Dev:     st.Dev,
		MtimeNS: st.Mtim.Nano(),
		CtimeNS: st.Ctim.Nano(),
	}
}

// linkFile links the open file f as name in the directory d: the file
// itself, whatever its name is by now.
func linkFile(f, d *os.File, name string) error {
	err := unix.Linkat(int(f.Fd()), "", int(d.Fd()), name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) { // without CAP_DAC_READ_SEARCH
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), int(d.Fd()), name, unix.AT_SYMLINK_FOLLOW)
	}
	return err
}
