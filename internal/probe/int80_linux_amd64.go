package probe

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// int80 makes an i386 system call: the kernel reads it with the 32-bit
// table, which a filter that does not check the architecture first would
// judge by the wrong numbers.
func int80(nr uintptr) uintptr

// i386Getpid is getpid in the i386 table (in x86_64's it is alarm).
const i386Getpid = 20

// int80Child makes an i386 getpid: it must never return a pid.
func int80Child() int {
	r := int64(int32(int80(i386Getpid)))
	if r < 0 {
		report("%s", unix.ErrnoName(syscall.Errno(-r)))
		return 0
	}
	report("pid %d", r)
	return 0
}

// foreignArch is the probe of THREATS 25 on this architecture.
var foreignArch = []Probe{
	{"ns-foreign-arch", "namespaces", "make an i386 system call (int 0x80) from a child", "the child is killed or gets ENOSYS", probeInt80},
}

func probeInt80(*Targets) (Status, string) {
	out, ws, err := runChild(nil, "int80")
	switch {
	case err != nil:
		return Error, err.Error()
	case ws.Signaled():
		return Contained, fmt.Sprintf("the child was killed by %v", ws.Signal())
	case out == "ENOSYS":
		return Contained, "int 0x80: ENOSYS"
	}
	return Escaped, "an i386 system call ran: " + out
}
