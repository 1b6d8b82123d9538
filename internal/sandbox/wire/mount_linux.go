package wire

import "golang.org/x/sys/unix"

// Attrs are the mount attributes of the bind: always nosuid; nodev except
// for the device nodes cordon binds, which are noexec instead; read-only
// unless writable.
func (m Mount) Attrs() uint64 {
	a := uint64(unix.MOUNT_ATTR_NOSUID)
	if m.Device {
		// A device node bound read-only is still read and written as a
		// device; only its inode (mode, owner, times) cannot change, so a
		// sandbox user that owns it (host root's nodes, when it maps to
		// host root) cannot chmod the host's /dev/null.
		a |= unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_RDONLY
	} else {
		a |= unix.MOUNT_ATTR_NODEV
	}
	if !m.Writable {
		a |= unix.MOUNT_ATTR_RDONLY
	}
	return a
}
