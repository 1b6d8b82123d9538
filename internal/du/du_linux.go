// Package du measures a directory tree that a sandbox wrote: the files,
// directories and links it holds and the bytes they take on disk, without
// following anything (every name in it is the sandbox's choosing: only
// directories are opened, each with O_NOFOLLOW beneath a descriptor), and
// without walking further than a bound allows, so that measuring costs no
// more than the bound lets the sandbox make.
package du

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Bound is where a walk stops: past Bytes bytes or Inodes entries (0: no
// bound of that kind).
type Bound struct {
	Bytes, Inodes int64
}

// Use is what a walk counted; Past says it stopped past its bound, its
// counts then being where it stopped. Unseen counts the directories it
// did not enter (deeper than MaxDepth, or closed to the walker) and the
// entries it could not look at: what they hold is not in Bytes and
// Inodes, and only a bound on the file system (or a walk that opens them
// up) bounds it.
type Use struct {
	Bytes, Inodes int64
	Past          bool
	Unseen        int64
}

// MaxDepth bounds the directories a walk descends: deeper ones are
// counted, not entered (overlay itself refuses paths past PATH_MAX).
const MaxDepth = 256

// Walk counts what the directory dirfd holds, at any depth, until past b.
// dirfd stays open. A directory the sandbox made unreadable (chmod 000),
// or deeper than MaxDepth, is counted, not entered, and counted in Unseen;
// an entry gone since it was listed is skipped.
func Walk(dirfd int, b Bound) (Use, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Use{}, err
	}
	w := &walk{bound: b, buf: make([]byte, 32<<10)}
	err = w.dir(fd, 0)
	u := Use{Bytes: w.bytes, Inodes: w.inodes, Past: w.past(), Unseen: w.unseen}
	if errors.Is(err, errPast) {
		err = nil
	}
	return u, err
}

// walk counts one walk.
type walk struct {
	bound         Bound
	bytes, inodes int64
	unseen        int64
	buf           []byte
}

// errPast ends a walk that is past its bound.
var errPast = errors.New("past the bound")

// dir counts what the directory fd holds (and closes it).
func (w *walk) dir(fd, depth int) error {
	defer unix.Close(fd)
	subdirs, err := w.list(fd, depth, func(st *unix.Stat_t) bool {
		w.inodes++
		w.bytes += st.Blocks * 512
		return w.past()
	}, func() { w.unseen++ })
	if err != nil {
		return err
	}
	for _, name := range subdirs {
		sub, ok := w.open(fd, name, func() { w.unseen++ })
		if !ok {
			continue
		}
		if err := w.dir(sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// list reads the directory fd: count is given each entry's stat, and
// ends the walk (errPast) by answering true; unseen is told of each entry
// that cannot be looked at and each directory too deep to enter. It
// returns the names of the directories to enter.
func (w *walk) list(fd, depth int, count func(*unix.Stat_t) bool, unseen func()) ([]string, error) {
	var subdirs []string
	for {
		n, err := unix.Getdents(fd, w.buf)
		if errors.Is(err, unix.ENOENT) {
			// Removed since it was opened (a directory is removed
			// only when empty): it holds nothing.
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return subdirs, nil
		}
		_, _, names := unix.ParseDirent(w.buf[:n], -1, nil)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if !errors.Is(err, unix.ENOENT) {
					unseen() // in a directory closed to search (chmod 444)
				}
				continue // or gone since: the sandbox is still writing
			}
			if count(&st) {
				return nil, errPast
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			if depth < MaxDepth {
				subdirs = append(subdirs, name)
			} else {
				unseen()
			}
		}
	}
}

// open opens the directory name beneath fd, following nothing; false when
// it is gone, is no longer a directory (replaced by a file or a link), or
// cannot be opened (then unseen is told).
func (w *walk) open(fd int, name string, unseen func()) (int, bool) {
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP):
		return 0, false // gone, or replaced by a file or a link since
	case err != nil:
		unseen() // unreadable
		return 0, false
	}
	return sub, true
}

func (w *walk) past() bool {
	return w.bound.Bytes > 0 && w.bytes > w.bound.Bytes || w.bound.Inodes > 0 && w.inodes > w.bound.Inodes
}
