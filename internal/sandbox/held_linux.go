package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/bufpool"
)

// outputGrace is how long, after a command of a kept-alive sandbox has
// ended, its output is still read while a process outside its process
// group (started in a session or process group of its own, which outlives
// the command) holds the output's pipe open. Past it, the output is cut.
var outputGrace = time.Second

// Bounds of one search for the processes holding a command's pipes.
const (
	maxScanProcs = 1 << 14
	maxScanFDs   = 1 << 18
)

// pump copies the pipe r to dst until end of file, or until r's read
// deadline passes: what then waits in the pipe is still copied, nothing
// written after. It stops early when dst fails.
func pump(r *os.File, dst io.Writer) {
	b := bufpool.Get()
	defer bufpool.Put(b)
	buf := b[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drainWaiting(r, dst, buf)
			return
		}
		if err != nil {
			return
		}
	}
}

// drainWaiting copies to dst the bytes waiting in the pipe r now, and no
// more: a writer still holding the pipe cannot keep it going.
func drainWaiting(r *os.File, dst io.Writer, buf []byte) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	for left := unread(r); left > 0; {
		n := 0
		rc.Control(func(fd uintptr) { n, err = unix.Read(int(fd), buf[:min(len(buf), left)]) })
		if n <= 0 || err != nil {
			return
		}
		left -= n
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// unread is how many bytes wait in the pipe r (0 once it is closed).
func unread(r *os.File) int {
	n := 0
	if rc, err := r.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	}
	return n
}

// pipeID identifies a pipe (its inode in pipefs).
type pipeID struct{ dev, ino uint64 }

// noPipe matches no pipe.
var noPipe = pipeID{^uint64(0), ^uint64(0)}

// pipeIDs identifies the pipes r; one that cannot be is noPipe, of which
// no process is ever seen holding: no evidence, no cut.
func pipeIDs(r ...*os.File) [2]pipeID {
	ids := [2]pipeID{noPipe, noPipe}
	for i, f := range r[:min(len(r), 2)] {
		if id, err := pipeOf(f); err == nil {
			ids[i] = id
		}
	}
	return ids
}

// pipeOf identifies the pipe f, through its raw descriptor: f.Fd would
// put it in blocking mode, where a read deadline cannot end a read.
func pipeOf(f *os.File) (pipeID, error) {
	var st unix.Stat_t
	rc, err := f.SyscallConn()
	if err == nil {
		if cerr := rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		return pipeID{}, fmt.Errorf("identifying the output pipe: %w", err)
	}
	return pipeID{st.Dev, st.Ino}, nil
}

// holder is a process of a sandbox that holds the write end of a
// command's stdout or stderr.
type holder struct {
	pid     int    // in the sandbox
	pgid    int    // in the sandbox
	name    string // as the process named itself: for display only, quoted
	streams [2]bool
}

// findHolders returns the processes descending from root (the host's pid
// of the sandbox's init, itself left out) that hold a write end of one of
// pipes. Every orphan of the sandbox is reparented to its init (or to a
// subreaper below it), so the walk sees them all, save those that fork
// and exit while it runs: a search finds evidence, its silence proves
// nothing. What the sandbox's processes control (their names) is only
// reported; the search only stats descriptors, never opens them.
func findHolders(root int, pipes [2]pipeID) []holder {
	var found []holder
	queue, seen, fds := []int{root}, map[int]bool{root: true}, 0
	for len(queue) > 0 && len(seen) <= maxScanProcs && fds <= maxScanFDs {
		pid := queue[0]
		queue = queue[1:]
		for _, child := range childrenOf(pid) {
			if !seen[child] {
				seen[child] = true
				queue = append(queue, child)
			}
		}
		if pid == root {
			continue
		}
		var streams [2]bool
		fds += heldPipes(pid, pipes, &streams)
		if streams[0] || streams[1] {
			h := holder{streams: streams}
			h.pid, h.pgid, h.name = describeProcess(pid)
			found = append(found, h)
		}
	}
	return found
}

// childrenOf lists the children of every thread of pid that can be read.
func childrenOf(pid int) []int {
	kids, _ := children(pid)
	return kids
}

// children lists the children of every thread of pid; complete says
// whether every thread's list was read (false when none was).
func children(pid int) (kids []int, complete bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return nil, false
	}
	complete = true
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			complete = false
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				kids = append(kids, n)
			}
		}
	}
	return kids, complete
}

// heldPipes marks in streams which of pipes pid holds open for writing,
// and returns how many descriptors it looked at.
func heldPipes(pid int, pipes [2]pipeID, streams *[2]bool) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	d, err := os.Open(dir)
	if err != nil {
		return 0 // gone: it holds nothing
	}
	defer d.Close()
	seen := 0
	for seen < maxScanFDs {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			seen++
			var st unix.Stat_t
			if unix.Stat(dir+"/"+name, &st) != nil {
				continue
			}
			for i, p := range pipes {
				if st.Dev == p.dev && st.Ino == p.ino && writes(pid, name) {
					streams[i] = true
				}
			}
		}
		if err != nil {
			break
		}
	}
	return seen
}

// writes reports whether descriptor fd of pid is open for writing.
func writes(pid int, fd string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return false
}

// describeProcess returns the pid and process group of pid in the
// innermost pid namespace it is in, and its name.
func describeProcess(pid int) (nspid, nspgid int, name string) {
	nspid = pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			key, v, _ := strings.Cut(line, ":")
			f := strings.Fields(v)
			if len(f) == 0 {
				continue
			}
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				continue
			}
			switch key {
			case "NSpid":
				nspid = n
			case "NSpgid":
				nspgid = n
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		name = strings.TrimSuffix(string(b), "\n")
	}
	return nspid, nspgid, name
}

// heldBy says which processes held which output, for an outcome's note.
func heldBy(hs []holder) string {
	var who []string
	var streams [2]bool
	for i, h := range hs {
		if i < 3 {
			who = append(who, fmt.Sprintf("%d %s", h.pid, strconv.QuoteToASCII(h.name)))
		}
		streams[0] = streams[0] || h.streams[0]
		streams[1] = streams[1] || h.streams[1]
	}
	if len(hs) > 3 {
		who = append(who, fmt.Sprintf("%d more", len(hs)-3))
	}
	what := "stdout and stderr"
	if !streams[1] {
		what = "stdout"
	} else if !streams[0] {
		what = "stderr"
	}
	subject := "process " + who[0]
	if len(who) > 1 {
		subject = "processes " + strings.Join(who[:len(who)-1], ", ") + " and " + who[len(who)-1]
	}
	verb := "holds"
	if len(hs) > 1 {
		verb = "hold"
	}
	return fmt.Sprintf("%s, outside the command's process group, still %s its %s open", subject, verb, what)
}

// awaitOutput waits, once a command has ended, until its output (pipes,
// identified by ids) has been read to the end (done closes): its pipes close when the last process
// holding them ends. The output is cut, what already waits in the pipes
// still read, only for a cause the note returned says: a process outside
// the command's process group still holds a pipe outputGrace after the
// command's end; the wall-clock limit (wall, nil without one) passes; the
// caller stops waiting (ctx). A busy host only makes it wait longer.
func (c *command) awaitOutput(ctx context.Context, done <-chan struct{}, pipes [2]*os.File, ids [2]pipeID, group int, wall <-chan time.Time) string {
	x := c.box
	ended := time.Now()
	search := func() (outside, inside []holder) {
		select {
		case <-x.reaped: // the sandbox is gone, and init's pid may be another's
			return nil, nil
		default:
		}
		for _, h := range findHolders(x.b.init.pid, ids) {
			if group != 0 && h.pgid == group {
				inside = append(inside, h)
			} else {
				outside = append(outside, h)
			}
		}
		return outside, inside
	}
	cut := func(why string, outside, inside []holder) string {
		select {
		case <-done: // read to the end meanwhile
			return ""
		default:
		}
		for _, p := range pipes {
			if p.SetReadDeadline(time.Now()) != nil {
				p.Close() // not pollable: reading ends after the read under way
			}
		}
		<-done
		held := "its pipes were still open, and no process of the sandbox was seen holding them"
		switch {
		case len(outside) > 0:
			held = heldBy(outside)
		case len(inside) > 0:
			held = "processes of the command's process group, killed with it, still held them"
		}
		return fmt.Sprintf("output was cut %s after the command's end%s: %s", time.Since(ended).Round(time.Millisecond), why, held)
	}
	t := time.NewTimer(outputGrace)
	defer t.Stop()
	every := 100 * time.Millisecond
	for {
		select {
		case <-done:
			return ""
		case <-ctx.Done():
			outside, inside := search()
			return cut(", when its caller stopped waiting", outside, inside)
		case <-wall:
			outside, inside := search()
			return cut(fmt.Sprintf(", when the wall-clock limit (%s) passed", x.lim.res.Wall), outside, inside)
		case <-t.C:
			if outside, inside := search(); len(outside) > 0 {
				return cut("", outside, inside)
			}
			// No holder seen: the host is busy, or one hid; look again.
			t.Reset(every)
			every = min(2*every, 2*time.Second)
		}
	}
}
