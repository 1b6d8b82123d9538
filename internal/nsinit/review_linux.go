package nsinit

import (
	"fmt"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/mnt"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// assembly is the host directory the new root is attached on while it is
// built (see rootfs.build); the overlay's layers are named through it.
const assembly = "/tmp"

// staging is the directory of the new root where the layers of a reviewed
// workspace are attached while its overlay is made; removed before the
// root is made read-only.
const staging = ".cordon-review"

// layerSlack is the inodes the layer's tmpfs needs for itself: its root,
// the upper and work directories, and overlay's work/work.
const layerSlack = 4

// placeReview mounts at target the reviewed workspace: an overlay whose
// lower layer is the host workspace, bound read-only, and whose upper and
// work directories are on a tmpfs of the sandbox's own, capped in bytes
// and in inodes, or, for a guarded workspace, in the host directory the
// host side opened (on disk, which the host side bounds), so that nothing
// the sandbox writes reaches the host tree. The layer's root goes to the
// host side on LayerFD, which reads the changes from it once the sandbox
// has ended.
func (r *rootfs) placeReview(s source, target *os.File) error {
	l := r.spec.Layer
	if l == nil {
		return fmt.Errorf("a reviewed workspace without layer limits")
	}
	stage, err := mnt.Walk(r.root, staging, r.creatable)
	if err != nil {
		return fmt.Errorf("staging directory: %w", err)
	}
	defer stage.Close()
	defer func() {
		for _, d := range []string{"lower", "layer"} {
			unix.Unmount(path.Join(assembly, staging, d), unix.MNT_DETACH)
			unix.Unlinkat(int(stage.Fd()), d, unix.AT_REMOVEDIR)
		}
		unix.Unlinkat(int(r.root.Fd()), staging, unix.AT_REMOVEDIR)
	}()

	// The lower layer, read-only, as the host side opened (and idmapped) it.
	lowerAt, err := mnt.Walk(stage, "lower", r.creatable)
	if err != nil {
		return err
	}
	err = mnt.Attach(s.src.Tree, lowerAt)
	lowerAt.Close()
	if err != nil {
		return fmt.Errorf("placing the workspace: %w", err)
	}
	var lower unix.Stat_t
	if err := unix.Fstat(int(s.src.Tree.Fd()), &lower); err != nil {
		return err
	}

	// The layer: the host's directory for a guarded workspace (bounded by
	// the host side), else a tmpfs with the review limits.
	layer := r.layer
	if layer == nil {
		layer, err = mnt.New("tmpfs", map[string]string{
			"mode":      "0700",
			"size":      strconv.FormatInt(l.Size, 10),
			"nr_inodes": strconv.FormatInt(l.Inodes+layerSlack, 10),
		}, scratchAttr)
		if err != nil {
			return fmt.Errorf("layer: %w", err)
		}
		defer layer.Close()
	}
	layerAt, err := mnt.Walk(stage, "layer", r.creatable)
	if err != nil {
		return err
	}
	err = mnt.Attach(layer, layerAt)
	layerAt.Close()
	if err != nil {
		return fmt.Errorf("placing the layer: %w", err)
	}
	// The upper directory is the merged root's: it has the workspace
	// root's owner and mode.
	if err := unix.Mkdirat(int(layer.Fd()), wire.LayerUpper, 0o700); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	if err := unix.Mkdirat(int(layer.Fd()), wire.LayerWork, 0o700); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	// An owner with no id in the sandbox (a directory others may write,
	// rootless) leaves the upper the sandbox user's, as its writes are.
	if lower.Uid != overflowID && lower.Gid != overflowID {
		if err := unix.Fchownat(int(layer.Fd()), wire.LayerUpper, int(lower.Uid), int(lower.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("layer: %w", err)
		}
	}
	if err := unix.Fchmodat(int(layer.Fd()), wire.LayerUpper, lower.Mode&0o7777, 0); err != nil {
		return fmt.Errorf("layer: %w", err)
	}

	at := path.Join(assembly, staging)
	ovl, err := mnt.New("overlay", map[string]string{
		"lowerdir":  path.Join(at, "lower"),
		"upperdir":  path.Join(at, "layer", wire.LayerUpper),
		"workdir":   path.Join(at, "layer", wire.LayerWork),
		"userxattr": "",
	}, scratchAttr)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	defer ovl.Close()
	if err := mnt.Attach(ovl, target); err != nil {
		return fmt.Errorf("placing the overlay: %w", err)
	}

	// The host side reads the changes through the layer's root.
	root, err := unix.Openat(int(layer.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the layer: %w", err)
	}
	rootFile := os.NewFile(uintptr(root), "layer")
	defer rootFile.Close()
	sock := os.NewFile(wire.LayerFD, "layer socket")
	defer sock.Close()
	if err := wire.SendFD(sock, rootFile); err != nil {
		return fmt.Errorf("sending the layer: %w", err)
	}
	return nil
}

// openLayer opens the host directory of a guarded workspace's layer, as a
// detached mount: the one the host side prepared, or one opened here; nil
// for any other workspace.
func openLayer(l *wire.Layer) (*os.File, error) {
	switch {
	case l == nil || l.Dir == "":
		return nil, nil
	case l.Tree > 0:
		return os.NewFile(uintptr(l.Tree), "layer"), nil
	}
	src, err := mnt.Open(l.Dir, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false)
	if err != nil {
		return nil, fmt.Errorf("workspace layer: %w", err)
	}
	if src.Kind != mnt.Dir {
		src.Close()
		return nil, fmt.Errorf("workspace layer %s: not a directory", l.Dir)
	}
	return src.Tree, nil
}

// overflowID is the id an unmapped owner shows as in a user namespace.
const overflowID = 65534
