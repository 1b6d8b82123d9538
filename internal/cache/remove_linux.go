package cache

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxRemoveDepth bounds how deep a removal descends (a descriptor is open
// for each level): a directory deeper is moved up, to the top of the tree
// being removed, and removed from there, so that a tree of any depth is
// removed with at most this many descriptors.
const maxRemoveDepth = 128

// movedPrefix names, at the top of a tree being removed, a directory moved
// up from deeper than maxRemoveDepth.
const movedPrefix = ".deep-"

// removeAt removes name in the directory parent and, for a directory,
// everything in it, following nothing: every directory is opened beneath
// its parent's descriptor with O_NOFOLLOW, and given back its owner's
// permissions first (Go's module cache makes its directories read-only;
// a sandbox may have made one unreadable). name is a directory no sandbox
// sees itself (a cache set aside: a sandbox sees only what is in its
// DIR), so that what is moved up to it stays out of every sandbox's view.
func removeAt(parent int, name string) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	top, err := openEntry(parent, name)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return unix.Unlinkat(parent, name, 0) // replaced since: try again
	}
	if err != nil {
		return err
	}
	defer unix.Close(top)
	r := &remover{top: top, buf: make([][]byte, maxRemoveDepth+1)}
	if err := r.dir(parent, name, top, 0); err != nil {
		return fmt.Errorf("%s/%s", name, err)
	}
	return nil
}

// remover removes one tree.
type remover struct {
	// top is the tree's own directory; moved counts the directories moved
	// up to it, done those removed since.
	top         int
	moved, done int
	// buf holds a buffer for each level.
	buf [][]byte
}

// remove removes name in the directory parent, depth levels beneath the
// top.
func (r *remover) remove(parent int, name string, depth int) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if depth >= maxRemoveDepth {
		return r.moveUp(parent, name)
	}
	fd, err := openEntry(parent, name)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return unix.Unlinkat(parent, name, 0) // replaced since: try again
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := r.dir(parent, name, fd, depth); err != nil {
		return fmt.Errorf("%s/%s", name, err)
	}
	return nil
}

// dir empties the directory fd, name in parent, and removes it.
func (r *remover) dir(parent int, name string, fd, depth int) error {
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return err
	}
	if r.buf[depth] == nil {
		r.buf[depth] = make([]byte, 16<<10)
	}
	buf := r.buf[depth]
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
				if err := r.remove(fd, sub, depth+1); err != nil {
					return err
				}
			}
		}
		if depth == 0 {
			// What was moved up, out of the descent, is removed from
			// here; it may move more up.
			for ; r.done < r.moved; r.done++ {
				if err := r.remove(r.top, movedPrefix+strconv.Itoa(r.done), 1); err != nil {
					return err
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

// moveUp moves the directory name in parent, too deep to descend, to the
// top of the tree, where the top's removal removes it.
func (r *remover) moveUp(parent int, name string) error {
	for {
		to := movedPrefix + strconv.Itoa(r.moved)
		err := unix.Renameat2(parent, name, r.top, to, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			// Moved up by a removal that did not end, and removed with
			// the rest: this one takes the next name.
			r.moved++
			continue
		}
		if err == nil {
			r.moved++
		}
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
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
