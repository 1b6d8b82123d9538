package sandbox

import "golang.org/x/sys/unix"

// Attrs are the mount attributes of the bind: always nosuid; nodev except
// for the device nodes cordon binds, which are noexec instead; read-only
// unless writable.
func (m Mount) Attrs() uint64 {
	a := uint64(unix.MOUNT_ATTR_NOSUID)
	if m.Device {
		a |= unix.MOUNT_ATTR_NOEXEC
	} else {
		a |= unix.MOUNT_ATTR_NODEV
	}
	if !m.Writable {
		a |= unix.MOUNT_ATTR_RDONLY
	}
	return a
}
