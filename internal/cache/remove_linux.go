package cache

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxRemoveDepth bounds how deep a removal descends (a descriptor is open
// for each level); a deeper tree is left, and the removal says so.
const maxRemoveDepth = 4096

// removeAt removes name in the directory parent and, for a directory,
// everything in it, following nothing: every directory is opened beneath
// its parent's descriptor with O_NOFOLLOW, and given back its owner's
// permissions first (Go's module cache makes its directories read-only;
// a sandbox may have made one unreadable).
func removeAt(parent int, name string, depth int) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	fd, err := openEntry(parent, name)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return unix.Unlinkat(parent, name, 0) // replaced since: try again
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if depth >= maxRemoveDepth {
		return fmt.Errorf("deeper than %d directories", maxRemoveDepth)
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return err
	}
	buf := make([]byte, 16<<10)
	for pass := 0; pass < 3; pass++ {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			return err
		}
		for {
			n, err := unix.Getdents(fd, buf)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			_, _, names := unix.ParseDirent(buf[:n], -1, nil)
			for _, sub := range names {
				if err := removeAt(fd, sub, depth+1); err != nil {
					return fmt.Errorf("%s/%s", name, err)
				}
			}
		}
		err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return fmt.Errorf("%s: still written to", name)
}

// openEntry opens the directory name in parent without following a link;
// one its owner may not read is given back read and search permission
// first, through a descriptor that names it and nothing else.
func openEntry(parent int, name string) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(parent, name, flags, 0)
	if !errors.Is(err, unix.EACCES) {
		return fd, err
	}
	p, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	err = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(p), 0o700, 0)
	unix.Close(p)
	if err != nil {
		return -1, err
	}
	return unix.Openat(parent, name, flags, 0)
}
