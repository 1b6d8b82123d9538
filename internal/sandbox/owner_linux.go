package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// usernsOwner is the host uid that owns the user namespaces cordon creates
// when it runs as root: a uid of its own, which no process of the host runs
// as and no file belongs to (Debian reserves it, systemd leaves it unused).
//
// The owner matters twice. The kernel keeps some per-user quotas (inotify
// instances and watches, fanotify groups and marks, namespaces, POSIX
// message queue bytes, queued signals) for each user namespace and charges
// them up the tree: what the sandbox holds counts, in the host's namespace,
// against its namespace's owner. Owned by root, a sandbox could use up
// root's quotas: every inotify_init of host root failing with EMFILE while
// it runs. And a process of the host running as the owner has every
// capability in the sandbox's namespaces: it could enter them, and reach
// through the sandbox's binds what its own uid may not. Hence neither root,
// nor the workspace owner (whose editor needs its inotify quota), nor
// nobody (which host daemons run as). The sandboxes of a root cordon share
// the owner's quotas; each holds a share of them only (see nsinit's
// hostShare), so that a few cannot starve the others.
//
// Rootless, the owner is the user who runs cordon, whose quotas the
// sandbox then shares, with the same limit on its share.
const usernsOwner = 65533

// secbitNoSetuidFixup keeps a thread's capabilities when its effective uid
// leaves 0 (SECBIT_NO_SETUID_FIXUP).
const secbitNoSetuidFixup = 1 << 2

// startOwned is start for a process that cordon, as root, creates in a new
// user namespace. The namespace's owner is the effective uid of the thread
// that forks, so the calling thread takes usernsOwner as its effective uid
// while it forks, keeping root's capabilities for the id maps, and takes
// back uid 0 before it serves anything else. It is the calling thread, not
// one of its own that would then end: the child's parent-death signal
// follows the thread that forked it, and on cgroup v1 the calling thread is
// the one placed in the sandbox's cgroup (see cgroup.StartIn). Where the
// uid cannot be taken (a root without CAP_SETPCAP, a user namespace that
// does not map usernsOwner), cordon's own uid owns the namespace, as
// rootless.
func startOwned(path string, args []string, files []*os.File, sys *syscall.SysProcAttr) (*process, error) {
	if os.Geteuid() != 0 || sys.Cloneflags&unix.CLONE_NEWUSER == 0 || weakened("userns-owner") {
		return start(path, args, files, sys)
	}
	runtime.LockOSThread()
	restore, err := becomeOwner()
	if err != nil {
		runtime.UnlockOSThread()
		return start(path, args, files, sys)
	}
	p, err := start(path, args, files, sys)
	if rerr := restore(); rerr != nil {
		// uid 0 stays the thread's real and saved uid, which it may always
		// take back: this cannot fail. If it did, the thread could serve
		// cordon no longer, and cordon stops (its sandboxes die with it).
		panic(fmt.Sprintf("restoring the credentials of cordon's thread: %v", rerr))
	}
	runtime.UnlockOSThread()
	return p, err
}

// becomeOwner sets the calling thread's effective uid (only that thread's:
// the raw system call, not the C library's nor Go's, which change every
// thread) to usernsOwner, keeping its capabilities. It returns how to undo
// it.
func becomeOwner() (restore func() error, err error) {
	bits, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0)
	if errno != 0 {
		return nil, errno
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits|secbitNoSetuidFixup, 0); errno != 0 {
		return nil, errno
	}
	resetSecurebits := func() error {
		if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits, 0); errno != 0 {
			return errno
		}
		return nil
	}
	keep := ^uintptr(0) // -1: unchanged
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, keep, usernsOwner, keep); errno != 0 {
		return nil, errors.Join(errno, resetSecurebits())
	}
	return func() error {
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep); errno != 0 {
			return errno
		}
		return resetSecurebits()
	}, nil
}
