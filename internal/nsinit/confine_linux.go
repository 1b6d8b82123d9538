package nsinit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/landlock"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
	"github.com/cordon-sandbox/cordon/internal/seccomp"
)

// confine applies the layers, in an order where each step still has what it
// needs: the capability bounding set and ambient set are emptied, core dumps
// disabled, no_new_privs set, Landlock applied, every capability dropped, and
// seccomp installed last. The command inherits all of it.
//
// The bounding and ambient sets are per thread and a child inherits them
// from the thread that forks it: they are emptied on init's main thread,
// to which Main locks the goroutine that starts the command. Everything else
// applies to every thread of init. It returns the Landlock ABI in force.
func confine(spec *wire.Spec) (int, error) {
	last, err := lastCap()
	if err != nil {
		return 0, err
	}
	if spec.Weaken.Caps {
		last = -1 // test builds only: keep every capability
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return 0, fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if !spec.Weaken.Caps {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return 0, fmt.Errorf("clearing ambient capabilities: %w", err)
		}
	}
	if err := setRlimits(spec.Rlimits); err != nil {
		return 0, err
	}
	if spec.Weaken.NNP {
		// test builds only
	} else if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return 0, fmt.Errorf("setting no_new_privs: %w", err)
	}
	abi := 0
	if spec.Landlock {
		if abi, err = landlock.Restrict(view(spec)); err != nil {
			return 0, err
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if spec.Weaken.Caps {
		// test builds only
	} else if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return 0, fmt.Errorf("dropping capabilities: %w", err)
	}
	if spec.Seccomp {
		prog, err := seccomp.Native()
		if err != nil {
			return 0, err
		}
		if err := prog.Install(); err != nil {
			return 0, err
		}
	}
	return abi, nil
}

// view lists what Landlock lets the sandbox write, from the spec.
func view(spec *wire.Spec) landlock.View {
	v := landlock.View{
		WritableDirs: []string{"/tmp", "/dev/shm", spec.Home},
		Devices:      []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts"},
		Refer:        spec.Weaken.Refer,
	}
	for _, m := range spec.Mounts {
		// A reviewed workspace is written, through its overlay, to the
		// layer: the sandbox may write it as a writable bind.
		if !(m.Writable || m.Review) || m.Missing || m.Device {
			continue
		}
		fi, err := os.Stat(m.Target)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			v.WritableDirs = append(v.WritableDirs, m.Target)
		} else {
			v.WritableFiles = append(v.WritableFiles, m.Target)
		}
	}
	return v
}

// allThreads makes a system call on every thread of init.
func allThreads(trap, a1, a2, a3 uintptr) error {
	_, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3)
	switch errno {
	case 0:
		return nil
	case syscall.ENOTSUP:
		// Go cannot make a call on every thread of a program linked
		// with cgo.
		return fmt.Errorf("%w: this cordon was built with cgo; build it with CGO_ENABLED=0", errno)
	}
	return errno
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("reading cap_last_cap: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parsing cap_last_cap: %w", err)
	}
	return n, nil
}

// setRlimits disables core dumps and sets the per-process limits. CPU time
// gets a hard limit one second above the soft one: SIGXCPU first, which a
// process may catch, then SIGKILL.
func setRlimits(r wire.Rlimits) error {
	limits := []struct {
		name     string
		resource int
		soft     int64
		hard     int64
	}{
		{"core dumps", unix.RLIMIT_CORE, 0, 0},
		{"CPU time", unix.RLIMIT_CPU, r.CPUSeconds, r.CPUSeconds + 1},
		{"file size", unix.RLIMIT_FSIZE, r.FileSize, r.FileSize},
		{"open files", unix.RLIMIT_NOFILE, r.OpenFiles, r.OpenFiles},
		{"processes", unix.RLIMIT_NPROC, r.Processes, r.Processes},
		{"data", unix.RLIMIT_DATA, r.Data, r.Data},
	}
	for _, l := range limits {
		if l.name != "core dumps" && l.soft == 0 {
			continue
		}
		// syscall.Setrlimit, not unix.Setrlimit: for RLIMIT_NOFILE it also
		// stops the Go runtime from restoring its saved limit in children.
		if err := syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: uint64(l.soft), Max: uint64(l.hard)}); err != nil {
			return fmt.Errorf("setting the %s limit: %w", l.name, err)
		}
	}
	return nil
}
