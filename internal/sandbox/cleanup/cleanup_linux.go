// Package cleanup is the helper cordon starts beside each sandbox that has
// cgroups or protected paths: if cordon itself is killed, the helper kills
// what is left of the sandbox, removes its cgroups and then the protected
// paths' placeholders. It runs outside the sandbox and imports only what
// that takes.
package cleanup

import (
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// Main is the cleanup helper (`DIR... -- PLACEHOLDER...`): when stdin
// closes, it kills what is left in the cgroup directories and removes them,
// then, with nothing of the sandbox left, the protected paths' placeholders
// (see protect.Sweep).
func Main(args []string) {
	dirs, placeholders := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		dirs, placeholders = args[:i], args[i+1:]
	}
	// fd 3 is cordon's pidfd, unless cordon could not make one.
	link, _ := os.Readlink("/proc/self/fd/3")
	hasPidfd := link == "anon_inode:[pidfd]"
	var b [1]byte
	swept := false // cordon removed the placeholders itself
	for {
		n, err := os.Stdin.Read(b[:])
		swept = swept || n > 0
		if err != nil {
			break
		}
	}
	for _, d := range dirs {
		if !strings.HasPrefix(d, "/sys/fs/cgroup/") || !strings.Contains(d, "/cordon-") {
			return // not a directory cordon made
		}
	}
	// A loaded host may take a while to end what was left; past the
	// deadline the sandbox may still be there, and its placeholders stay.
	deadline := time.Now().Add(30 * time.Second)
	for cgroup.Reclaim(dirs) != nil {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	if swept {
		return
	}
	// A placeholder is removed only when nothing holds a lock on it: wait
	// until cordon has exited, its files closed (fd 3 is its pidfd, when
	// the kernel has them), so that its own locks are not mistaken for
	// another sandbox's.
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
	for hasPidfd && time.Now().Before(deadline) {
		n, err := unix.Poll(fds, int(time.Until(deadline)/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			break // cordon is gone
		}
	}
	protect.Sweep(placeholders)
}
