package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/container"
)

// idmapError is a writable bind that cordon, as root, could not idmap to
// the sandbox user: its file system does not support idmapped mounts
// (overlayfs, the root of every container; NFS) or cordon is not
// privileged over it (a volume of the host's disk seen from a container in
// a user namespace).
type idmapError struct {
	path     string
	fsType   string
	uid, gid uint32 // its owner
	err      error
}

func (e *idmapError) Error() string {
	return fmt.Sprintf("idmapping %s (%s): %v", e.path, e.fsType, e.err)
}

func (e *idmapError) Unwrap() error { return e.err }

// refusal names the missing piece and what gives it back: a file system
// that can be idmapped, an owner that is not root, or the user's word that
// the sandbox user may be the owner.
func (e *idmapError) refusal() error {
	fix := container.Fixes(container.NeedIdmap, e.path)
	return fmt.Errorf("%s is on %s, which cannot be idmapped here (%v), and uid %d owns it: "+
		"the sandbox user (nobody on the host) cannot write it without being host root, so cordon refuses. Any of these gives it back:\n"+
		"  - a volume or a tmpfs there: Docker: %s; Podman: %s; Kubernetes: %s\n"+
		"  - an owner that is not root: chown -R 1000:1000 %s (the sandbox user then maps to it), or run cordon as that user: Docker: %s; Podman: %s; Kubernetes: %s\n"+
		"  - --allow-degraded=%s: the sandbox user maps to the owner, host root (what only root may read or write in the view is then open to it)",
		e.path, e.fsType, e.err, e.uid,
		fix.Docker, fix.Podman, fix.Kubernetes,
		e.path, container.UserFlags.Docker, container.UserFlags.Podman, container.UserFlags.Kubernetes,
		LayerIdmap)
}

// fsTypeOf names the file system of an open file, for messages.
func fsTypeOf(f *os.File) string {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return "an unknown file system"
	}
	return container.FSName(int64(st.Type))
}
