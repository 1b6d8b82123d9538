//go:build !linux

package egress

import "net"

// splice is not used where the kernel has no splice(2): the caller copies
// through a buffer.
func (t *tunnel) splice(dst, src net.Conn, out bool) (handled bool, err error) {
	return false, nil
}
