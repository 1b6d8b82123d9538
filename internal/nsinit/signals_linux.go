package nsinit

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kept are the signals init leaves to the Go runtime: SIGCHLD (ignoring it
// would make the kernel reap the sandbox's processes before init sees how
// the command ended), SIGURG (goroutine preemption) and 33, with which
// syscall.AllThreadsSyscall reaches every thread. Its handler returns at
// once when no such call is under way.
var kept = []unix.Signal{unix.SIGCHLD, unix.SIGURG, unix.Signal(33)}

// ignoreSignals makes the kernel discard every signal sent to init that
// init neither forwards nor keeps. The command can signal init, its PID 1:
// the kernel then delivers only the signals init has a handler for, and the
// Go runtime installs one for nearly all of them. Its handler exits, with a
// traceback, on SIGABRT, SIGILL, SIGTRAP, SIGSTKFLT, SIGSYS, SIGSEGV, SIGBUS
// and SIGFPE; the last three, sent with rt_sigqueueinfo(2), it takes for
// faults of its own, which os/signal cannot make it ignore. Init would die,
// and the run be reported as cordon's failure.
//
// Each of these handlers is replaced with SIG_IGN, directly: os/signal's
// Ignore would tell the runtime to keep the signal ignored in the command
// as well (SIG_IGN survives execve), while a handler the runtime believes
// its own is reset to SIG_DFL in every child it forks. Signals without a
// handler are left alone: the kernel drops those for a PID namespace's init.
// A real fault of init's own then kills it, as a panic would have, without
// a traceback.
func ignoreSignals(forwarded []os.Signal) error {
	skip := map[unix.Signal]bool{unix.SIGKILL: true, unix.SIGSTOP: true}
	for _, s := range forwarded {
		skip[s.(unix.Signal)] = true
	}
	for _, s := range kept {
		skip[s] = true
	}
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if skip[sig] {
			continue
		}
		var old sigaction
		if err := rtSigaction(sig, nil, &old); err != nil {
			return fmt.Errorf("reading the action of %s: %w", unix.SignalName(sig), err)
		}
		if old.handler == sigDFL || old.handler == sigIGN {
			continue
		}
		if err := rtSigaction(sig, &sigaction{handler: sigIGN}, nil); err != nil {
			return fmt.Errorf("ignoring %s: %w", unix.SignalName(sig), err)
		}
	}
	return nil
}

const (
	sigDFL = 0
	sigIGN = 1
)

// sigaction is the kernel's struct sigaction on the architectures cordon
// supports (386, amd64, arm, arm64, all with sa_restorer), whose mask has
// 64 bits.
type sigaction struct {
	handler  uintptr
	flags    uintptr
	restorer uintptr
	mask     uint64
}

func rtSigaction(sig unix.Signal, act, old *sigaction) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), unsafe.Sizeof(sigaction{}.mask), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// detachStdio puts /dev/null on init's descriptors 0-2 once the command has
// its own: nothing init or the Go runtime writes there (a crash's
// traceback) can then reach the command's output, and init holds neither
// the command's pipes nor, with a terminal, the user's.
func detachStdio() error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for fd := 0; fd <= 2; fd++ {
		if err := unix.Dup3(int(null.Fd()), fd, 0); err != nil {
			return fmt.Errorf("descriptor %d: %w", fd, err)
		}
	}
	return nil
}
