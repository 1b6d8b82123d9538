package nsinit

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// hostShare is the part of a host user's quota one sandbox may hold: one
// hostShare-th.
//
// Some of the kernel's per-user quotas are kept for each user namespace and
// charged up the tree of user namespaces: what the sandbox's user holds
// counts, in the host's namespace, against the owner of the sandbox's user
// namespace, which is cordon's own user when it runs rootless, and a uid of
// its own when it runs as root (see sandbox.usernsOwner). Inside its own
// namespace the sandbox's limit would otherwise be the owner's whole quota,
// and a sandbox holding all of it would leave its owner (rootless, the user
// who ran cordon) without: no inotify instance for the user's editor. With
// a share, several sandboxes of one owner still compete for its quota, but
// it takes hostShare of them at their limit to use it up.
const hostShare = 8

// userLimits are the quotas of the sandbox's user namespace (/proc/sys/user)
// set to a share of the host's per-user limit, read from /proc/sys/fs (the
// host's initial namespace's, whichever namespace reads it). Nested user
// namespaces are limited to none apart, by limitUserNamespaces, and the
// other namespace types need capabilities the command has none of.
var userLimits = []struct{ name, host string }{
	{"sys/user/max_inotify_instances", "sys/fs/inotify/max_user_instances"},
	{"sys/user/max_inotify_watches", "sys/fs/inotify/max_user_watches"},
	{"sys/user/max_fanotify_groups", "sys/fs/fanotify/max_user_groups"},
	{"sys/user/max_fanotify_marks", "sys/fs/fanotify/max_user_marks"},
}

// sharedRlimits are the quotas the kernel charges the same way but takes
// from the process's rlimit at each level: bytes of POSIX message queues,
// and signals queued with rt_sigqueueinfo(2) or by timers. Init inherits
// cordon's; the command gets a share of them.
var sharedRlimits = []struct {
	name     string
	resource int
}{
	{"message queue bytes", unix.RLIMIT_MSGQUEUE},
	{"pending signals", unix.RLIMIT_SIGPENDING},
}

// limitUserQuotas sets the sandbox's quotas to a share of its owner's, and
// returns notes for those the kernel would not set: a quota left unlimited
// is not fatal (it was before cordon set it), but it is said.
func limitUserQuotas(proc *os.File) []string {
	var notes []string
	for _, l := range userLimits {
		host, err := readInt(proc, l.host)
		if errors.Is(err, unix.ENOENT) {
			continue // a kernel without this quota
		}
		if err == nil {
			err = writeInt(proc, l.name, max(1, host/hostShare))
		}
		if err != nil {
			notes = append(notes, "/proc/"+l.name+" not limited: "+err.Error())
		}
	}
	for _, l := range sharedRlimits {
		var rl syscall.Rlimit
		err := syscall.Getrlimit(l.resource, &rl)
		if err == nil && rl.Max != unix.RLIM_INFINITY {
			share := max(1, rl.Max/hostShare)
			err = syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: min(rl.Cur, share), Max: share})
		}
		if err != nil {
			notes = append(notes, l.name+" not limited: "+err.Error())
		}
	}
	return notes
}

// readInt reads the number in the file name below proc.
func readInt(proc *os.File, name string) (uint64, error) {
	fd, err := unix.Openat(int(proc.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 32)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
}

// writeInt writes n to the file name below proc.
func writeInt(proc *os.File, name string, n uint64) error {
	fd, err := unix.Openat(int(proc.Fd()), name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(strconv.FormatUint(n, 10)+"\n"))
	return err
}
