package probe

import (
	"fmt"
	"runtime/debug"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// int80 makes an i386 system call: the kernel reads it with the 32-bit
// table, which a filter that does not check the architecture first would
// judge by the wrong numbers.
func int80(nr uintptr) uintptr

// i386Getpid is getpid in the i386 table (in x86_64's it is alarm).
const i386Getpid = 20

// int80Child makes an i386 getpid: it must never return a pid. A kernel
// built or booted without i386 emulation answers int 0x80 with a general
// protection fault, which reaches the child as SIGSEGV: the call did not run,
// and the child says so instead of dying without a word.
func int80Child() (code int) {
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			report("SIGSEGV (%v)", r)
			code = 0
		}
	}()
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

// probeInt80 says escaped only when the child reports the pid the i386
// call returned; a child that ends without a report is an error, with what
// is known of how it ended.
func probeInt80(*Targets) (Status, string) {
	c, err := runChild(nil, "int80")
	if err != nil {
		return Error, err.Error()
	}
	return judgeInt80(c)
}

// judgeInt80 reads how the child of ns-foreign-arch ended.
func judgeInt80(c child) (Status, string) {
	switch {
	case c.ws.Signaled():
		return Contained, fmt.Sprintf("the child was killed by %v", c.ws.Signal())
	case c.out == "ENOSYS":
		return Contained, "int 0x80: ENOSYS"
	case strings.HasPrefix(c.out, "SIGSEGV"):
		return Contained, "the kernel refuses int 0x80 here (SIGSEGV): no i386 system call can run"
	case strings.HasPrefix(c.out, "pid "):
		return Escaped, "an i386 system call ran: " + c.out
	case c.out != "":
		return Error, "the child reported something else: " + c.out
	}
	return Error, c.unreported()
}
