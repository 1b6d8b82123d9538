package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Without a cgroup, RLIMIT_NPROC bounds the sandbox's tasks: the kernel
// counts them per user of a user namespace, and each sandbox has its own
// namespace and one user, so the count is the sandbox's. The kernel
// refuses a fork past it and tells nobody but the process that forked,
// which a fork bomb ignores. cordon counts the tasks itself, from the
// host, and ends the run when they reach the limit: what a cgroup reports
// as a refused fork (pids.events), this reports as the sandbox holding
// every task the limit allows.
//
// The count reads the sandbox's own /proc, whose listing is its pid
// namespace's processes, whatever their parents: a process that forks a
// successor and exits (a hopping fork bomb) cannot hide from it the way it
// hides from a walk of the process tree, its successor moved under init
// after init's children were read. Once init ends, the namespace is empty
// and the listing with it: no host process is ever counted.

// taskCounter counts the tasks (processes and threads) of a sandbox from
// the host, through its /proc, opened once init has mounted it.
type taskCounter struct {
	init int    // init's host pid
	ns   uint64 // its pid namespace's inode, read while it surely lived
	proc int    // the sandbox's /proc, once opened; -1 before
	// buf and dents are reused across counts; the watcher alone counts.
	buf, dents []byte
}

// newTaskCounter prepares to count the tasks of the sandbox whose init has
// host pid init. init must not have been reaped yet (its pid is still its
// own).
func newTaskCounter(init int) (*taskCounter, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", init), &st); err != nil {
		return nil, fmt.Errorf("reading the sandbox's pid namespace: %w", err)
	}
	// A small listing at a time: a process that forks and ends while
	// the count reads the stats of those listed before it is found again,
	// as its successor, further on (a new pid is a larger one).
	return &taskCounter{init: init, ns: st.Ino, proc: -1, buf: make([]byte, 1024), dents: make([]byte, 1024)}, nil
}

// errNotYet is a /proc that is not (yet) the sandbox's: init has not
// mounted it, or init's pid is another process's now.
var errNotYet = errors.New("the sandbox's /proc is not mounted")

// open opens the sandbox's /proc, through init's root: a procfs whose pid
// 1 is in the namespace read at the start, or nothing.
func (t *taskCounter) open() error {
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", t.init), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the sandbox's root: %w", err)
	}
	defer unix.Close(root)
	// Beneath the root, no link followed: only the mount cordon made.
	fd, err := unix.Openat2(root, "proc", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fmt.Errorf("opening the sandbox's /proc: %w", err)
	}
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.PROC_SUPER_MAGIC ||
		unix.Fstatat(fd, "1/ns/pid", &st, 0) != nil || st.Ino != t.ns {
		unix.Close(fd)
		return errNotYet
	}
	t.proc = fd
	return nil
}

// close lets the sandbox's /proc go.
func (t *taskCounter) close() {
	if t.proc >= 0 {
		unix.Close(t.proc)
		t.proc = -1
	}
}

// count counts the sandbox's tasks, stopping once there are more than
// stop of them (a count the watcher need not finish). A process that
// starts or ends while it counts may be counted or not; one that forks
// and ends as it is counted is counted in its successor, listed later
// (or twice, when both are): a sandbox that holds the limit is seen at
// it.
func (t *taskCounter) count(stop int) (int, error) {
	if t.proc < 0 {
		if err := t.open(); err != nil {
			return 0, err
		}
	}
	if _, err := unix.Seek(t.proc, 0, 0); err != nil {
		return 0, fmt.Errorf("listing the sandbox's /proc: %w", err)
	}
	n := 0
	for n <= stop {
		size, err := unix.Getdents(t.proc, t.dents)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("listing the sandbox's /proc: %w", err)
		}
		if size <= 0 {
			break
		}
		var names []string
		_, _, names = unix.ParseDirent(t.dents[:size], -1, names)
		for _, name := range names {
			if name[0] < '1' || name[0] > '9' {
				continue // not a process
			}
			if n += t.threads(name); n > stop {
				break
			}
		}
	}
	return n, nil
}

// threads is how many tasks the process of the sandbox's /proc entry name
// holds (its stat's num_threads); 0 once it has ended.
func (t *taskCounter) threads(name string) int {
	fd, err := unix.Openat(t.proc, name+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	k, err := unix.Read(fd, t.buf)
	if err != nil || k <= 0 {
		return 0
	}
	// After the command's name, in parentheses (which may hold anything),
	// num_threads is the 18th field.
	rest := t.buf[:k]
	if i := bytes.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := bytes.Fields(rest)
	if len(fields) < 18 {
		return 1
	}
	m, err := strconv.Atoi(string(fields[17]))
	if err != nil || m < 1 {
		return 1
	}
	return m
}

// countShare bounds the time counting takes: a count that took d waits
// countShare*d before the next, whatever wakes the watcher.
const countShare = 20

// watchTasks ends the run when the sandbox holds as many tasks as
// RLIMIT_NPROC allows it: its next fork fails. It keeps the watcher's
// pace, slower while a kept-alive sandbox is idle or its tree is large.
func (l *limiter) watchTasks(tc *taskCounter, limit int64) {
	defer l.wg.Done()
	defer tc.close()
	t := time.NewTimer(watchEvery)
	defer t.Stop()
	var earliest time.Time // no count before it: the pace of the last
	for {
		next, ok := l.wake(t)
		if !ok {
			return
		}
		if wait := time.Until(earliest); wait > 0 {
			// Woken by a command's start before the pace allows.
			t.Reset(wait)
			continue
		}
		began := time.Now()
		n, err := tc.count(int(limit))
		cost := time.Since(began)
		earliest = began.Add(countShare * cost)
		t.Reset(max(next, countShare*cost))
		if err != nil {
			continue
		}
		l.mu.Lock()
		l.peakTasks = max(l.peakTasks, int64(n))
		l.mu.Unlock()
		if int64(n) >= limit {
			l.tripWith("pids", fmt.Sprintf("cordon counted %d tasks (processes and threads) in the sandbox, all that RLIMIT_NPROC lets it hold: its next fork would fail", n))
			return
		}
	}
}
