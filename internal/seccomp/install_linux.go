package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install loads the program into the kernel for every thread of the calling
// process (SECCOMP_FILTER_FLAG_TSYNC). no_new_privs must already be set.
func (p *Program) Install() error {
	if len(p.Instructions) == 0 {
		return fmt.Errorf("installing seccomp filter: empty program")
	}
	filters := make([]unix.SockFilter, len(p.Instructions))
	for i, in := range p.Instructions {
		filters[i] = unix.SockFilter{Code: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("installing seccomp filter: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("installing seccomp filter: thread %d could not be synchronized", r)
	}
	return nil
}

// Available reports whether the kernel supports seccomp filters.
func Available() error {
	// PR_GET_SECCOMP returns the current mode; EINVAL means no seccomp.
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp unavailable: %w", err)
	}
	// Asking for a known action checks that filter mode is built in.
	action := uint32(RetAllow)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		return fmt.Errorf("seccomp filters unavailable: %w", errno)
	}
	return nil
}
