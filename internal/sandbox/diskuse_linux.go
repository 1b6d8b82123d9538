package sandbox

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/du"
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
	defer unix.Close(fd)
	w, err := du.Walk(fd, du.Bound{Bytes: bound.Size, Inodes: bound.Inodes})
	u := layerUse{bytes: w.Bytes, inodes: w.Inodes}
	switch {
	case bound.Size > 0 && w.Bytes > bound.Size:
		u.full = "workspace_size"
	case bound.Inodes > 0 && w.Inodes > bound.Inodes:
		u.full = "workspace_inodes"
	case err != nil:
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
