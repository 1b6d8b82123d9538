package sandbox

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// diskUse walks the upper directory of a guarded workspace's layer on
// disk (the sandbox chose every name in it: nothing is followed, only
// directories are opened) and counts its files, directories and links and
// the bytes they take, until one is past bound's limit: the walk costs no
// more than the limit allows the sandbox to make. A directory the sandbox
// made unreadable (chmod 000) is counted, not entered: cordon's own
// capture opens it once the sandbox has ended.
func diskUse(layer *os.File, bound *Layer) (layerUse, error) {
	if u, ok := fsUse(layer, bound); ok {
		return u, nil
	}
	fd, err := unix.Openat(int(layer.Fd()), wire.LayerUpper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return layerUse{}, err
	}
	w := &diskWalk{bound: bound, buf: make([]byte, 32<<10)}
	err = w.dir(fd, 0)
	u := layerUse{bytes: w.bytes, inodes: w.inodes}
	switch {
	case bound.Size > 0 && w.bytes > bound.Size:
		u.full = "workspace_size"
	case bound.Inodes > 0 && w.inodes > bound.Inodes:
		u.full = "workspace_inodes"
	case err != nil && !errors.Is(err, errPast):
		return u, err
	}
	return u, nil
}

// fsUse ends a layer on disk whose file system has lost more than its
// limits allow since the run began, beyond what a walk can see (a file
// deleted while it is open, a directory its owner cannot enter): more
// than the limit plus the larger of the limit and fsSlack bytes (or
// inodes: fsSlackInodes). Another writer on the same file system counts
// too, so that the margin is wide; what the sandbox can hide is bounded by
// it. ok is false while the file system is within.
func fsUse(layer *os.File, bound *Layer) (layerUse, bool) {
	if bound.Free == nil {
		return layerUse{}, false
	}
	var st unix.Statfs_t
	if unix.Fstatfs(int(layer.Fd()), &st) != nil {
		return layerUse{}, false
	}
	lost := int64(bound.Free[0]-min(bound.Free[0], st.Bavail)) * st.Bsize
	lostInodes := int64(bound.Free[1] - min(bound.Free[1], st.Ffree))
	switch {
	case bound.Size > 0 && lost > bound.Size+max(bound.Size, fsSlack):
		return layerUse{bytes: lost, inodes: lostInodes, full: "workspace_size"}, true
	case bound.Inodes > 0 && lostInodes > bound.Inodes+max(bound.Inodes, fsSlackInodes):
		return layerUse{bytes: lost, inodes: lostInodes, full: "workspace_inodes"}, true
	}
	return layerUse{}, false
}

// The margins of fsUse.
const (
	fsSlack       = 1 << 30
	fsSlackInodes = 100000
)

// noteFree records the free blocks and inodes of the file system of a
// layer on disk, when its run begins (see fsUse).
func noteFree(dir string, bound *Layer) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		bound.Free = &[2]uint64{st.Bavail, st.Ffree}
	}
}

// diskWalk counts a walk of a layer on disk.
type diskWalk struct {
	bound         *Layer
	bytes, inodes int64
	buf           []byte
}

// errPast ends a walk that is past a limit.
var errPast = errors.New("past the layer's limits")

// maxWalkDepth bounds the directories a walk descends: deeper ones are
// counted, not entered (overlay itself refuses paths past PATH_MAX).
const maxWalkDepth = 256

// dir counts what the directory fd holds (and closes it).
func (w *diskWalk) dir(fd, depth int) error {
	defer unix.Close(fd)
	var subdirs []string
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		_, _, names := unix.ParseDirent(w.buf[:n], -1, nil)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since: the sandbox is still writing
			}
			w.inodes++
			w.bytes += st.Blocks * 512
			if w.past() {
				return errPast
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR && depth < maxWalkDepth {
				subdirs = append(subdirs, name)
			}
		}
	}
	for _, name := range subdirs {
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // unreadable, or replaced by a file since
		}
		if err := w.dir(sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (w *diskWalk) past() bool {
	return w.bound.Size > 0 && w.bytes > w.bound.Size || w.bound.Inodes > 0 && w.inodes > w.bound.Inodes
}
