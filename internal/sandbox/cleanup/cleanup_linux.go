// Package cleanup is the helper cordon starts beside each sandbox that has
// cgroups or protected paths (or one for all the sandboxes a cordon serve
// keeps): if cordon itself is killed, the helper kills what is left of the
// sandbox, removes its cgroups and then the protected paths' placeholders.
// It runs outside the sandbox and imports only what that takes.
package cleanup

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// SharedArg, as the first argument, makes the helper the one of a process
// that keeps many sandboxes (cordon serve): see Shared.
const SharedArg = "--shared"

// Main is the cleanup helper (`DIR... -- PLACEHOLDER...`): when stdin
// closes, it kills what is left in the cgroup directories and removes them,
// then, with nothing of the sandbox left, the protected paths' placeholders
// (see protect.Sweep). A byte on stdin says cordon removed the
// placeholders itself.
func Main(args []string) {
	if len(args) > 0 && args[0] == SharedArg {
		Shared(os.Stdin)
		return
	}
	dirs, placeholders := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		dirs, placeholders = args[:i], args[i+1:]
	}
	var b [1]byte
	swept := false // cordon removed the placeholders itself
	for {
		n, err := os.Stdin.Read(b[:])
		swept = swept || n > 0
		if err != nil {
			break
		}
	}
	if !ours(dirs) {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	if !reclaim(dirs, deadline) || swept {
		return
	}
	waitForCordon(deadline)
	protect.Sweep(placeholders)
}

// Shared is the cleanup helper of a process that keeps many sandboxes: one
// helper for them all, told of each on stdin, one line each:
//
//	add ID DIR... -- PLACEHOLDER...   a sandbox and what to remove
//	done ID                           cordon removed them all itself
//	failed ID                         cordon could not remove its cgroups
//
// For a failed sandbox the helper removes the cgroups now, and its
// placeholders once cordon has exited; when stdin closes (cordon was
// killed), it does so for every sandbox not done.
func Shared(stdin io.Reader) {
	r := registry{sandboxes: map[string][]string{}, reclaim: reclaim, sweep: protect.Sweep, waitForCordon: waitForCordon}
	r.serve(stdin)
}

// serve applies what stdin says until it closes, then ends.
func (r *registry) serve(stdin io.Reader) {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for sc.Scan() {
		r.apply(sc.Text())
	}
	// A line over the bound (cordon sends none) ends what the helper is
	// told, not cordon's sandboxes: it still waits for cordon to go.
	io.Copy(io.Discard, stdin)
	r.end()
}

// MaxLine bounds one line of Shared's input; cordon refuses a sandbox
// whose line would be longer.
const MaxLine = 4 << 20

// registry is what Shared has been told.
type registry struct {
	// sandboxes are the cgroup directories and placeholders of each
	// sandbox not done, by ID.
	sandboxes map[string][]string
	// leftover are the placeholders of failed sandboxes, removed at the
	// end.
	leftover []string

	reclaim       func(dirs []string, deadline time.Time) bool
	sweep         func(placeholders []string)
	waitForCordon func(deadline time.Time)
}

func (r *registry) apply(line string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return
	}
	switch id := f[1]; f[0] {
	case "add":
		r.sandboxes[id] = f[2:]
	case "done":
		delete(r.sandboxes, id)
	case "failed":
		dirs, placeholders := split(r.sandboxes[id])
		delete(r.sandboxes, id)
		if ours(dirs) {
			r.reclaim(dirs, time.Now().Add(30*time.Second))
		}
		r.leftover = append(r.leftover, placeholders...)
	}
}

// end removes what is left once cordon has gone.
func (r *registry) end() {
	deadline := time.Now().Add(30 * time.Second)
	placeholders := r.leftover
	for _, args := range r.sandboxes {
		dirs, ph := split(args)
		if ours(dirs) && r.reclaim(dirs, deadline) {
			placeholders = append(placeholders, ph...)
		}
	}
	if len(placeholders) > 0 {
		r.waitForCordon(deadline)
		r.sweep(placeholders)
	}
}

// split parses `DIR... -- PLACEHOLDER...`.
func split(args []string) (dirs, placeholders []string) {
	if i := slices.Index(args, "--"); i >= 0 {
		return args[:i], args[i+1:]
	}
	return args, nil
}

// ours reports whether every directory is one cordon made.
func ours(dirs []string) bool {
	for _, d := range dirs {
		if !strings.HasPrefix(d, "/sys/fs/cgroup/") || !strings.Contains(d, "/cordon-") || strings.Contains(d, "/../") {
			return false
		}
	}
	return true
}

// reclaim kills what is left in the cgroups and removes them. A loaded host
// may take a while to end what was left; past the deadline the sandbox may
// still be there (false), and its placeholders stay.
func reclaim(dirs []string, deadline time.Time) bool {
	for cgroup.Reclaim(dirs) != nil {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// waitForCordon waits until cordon has exited, its files closed: fd 3 is
// its pidfd, when the kernel has them. A placeholder is removed only when
// nothing holds a lock on it, and cordon's own locks must not be mistaken
// for another sandbox's.
func waitForCordon(deadline time.Time) {
	if link, _ := os.Readlink("/proc/self/fd/3"); link != "anon_inode:[pidfd]" {
		return
	}
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
	for time.Now().Before(deadline) {
		n, err := unix.Poll(fds, int(time.Until(deadline)/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			return // cordon is gone
		}
	}
}
