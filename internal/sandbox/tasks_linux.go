package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Without a cgroup, RLIMIT_NPROC bounds the sandbox's tasks: the kernel
// counts them per user of a user namespace, and each sandbox has its own
// namespace and one user, so the count is the sandbox's. The kernel
// refuses a fork past it and tells nobody but the process that forked,
// which a fork bomb ignores. cordon counts the tasks itself, from the
// host's /proc, and ends the run when they reach the limit: what a cgroup
// reports as a refused fork (pids.events), this reports as the sandbox
// holding every task the limit allows.

// taskCounter counts the tasks (processes and threads) of a sandbox from
// the host: those of its init, found by host pid, and of every process
// under it. Every process of the sandbox is under init, which is the
// reaper of its pid namespace.
type taskCounter struct {
	init int
	// buf is reused across counts; the watcher alone counts.
	buf []byte
}

// counts reports whether this kernel's /proc lists a task's children
// (CONFIG_PROC_CHILDREN), without which the tree cannot be walked.
func (t *taskCounter) counts() bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", t.init, t.init))
	return err == nil
}

// count walks the tree under init and counts its tasks, stopping once
// there are more than stop of them (a count the watcher need not finish).
// A task that starts or ends during the walk may be counted or not.
func (t *taskCounter) count(stop int) (int, error) {
	n := 0
	queue := []int{t.init}
	for len(queue) > 0 && n <= stop {
		pid := queue[0]
		queue = queue[1:]
		dir := "/proc/" + strconv.Itoa(pid) + "/task"
		tids, err := readNames(dir)
		if err != nil {
			if pid == t.init {
				return 0, fmt.Errorf("counting the sandbox's tasks: %w", err)
			}
			continue // ended meanwhile
		}
		for _, tid := range tids {
			n++
			queue = append(queue, t.readChildren(dir+"/"+tid+"/children")...)
		}
	}
	return n, nil
}

// readNames lists a /proc directory's entries.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readChildren reads a task's children file: host pids, space separated.
// A task that ended meanwhile has none.
func (t *taskCounter) readChildren(path string) []int {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if t.buf == nil {
		t.buf = make([]byte, 4096)
	}
	var out []int
	var rest []byte
	for {
		n, err := unix.Read(fd, t.buf)
		if n <= 0 || err != nil {
			break
		}
		data := append(rest, t.buf[:n]...)
		// A number cut at the end of this read continues in the next.
		cut := bytes.LastIndexByte(data, ' ')
		rest = append([]byte(nil), data[cut+1:]...)
		for _, field := range bytes.Fields(data[:cut+1]) {
			if pid, err := strconv.Atoi(string(field)); err == nil {
				out = append(out, pid)
			}
		}
	}
	if pid, err := strconv.Atoi(string(bytes.TrimSpace(rest))); err == nil {
		out = append(out, pid)
	}
	return out
}

// countShare bounds the time counting takes: a count that took d waits
// countShare*d before the next.
const countShare = 20

// watchTasks ends the run when the sandbox holds as many tasks as
// RLIMIT_NPROC allows it: its next fork fails. It keeps the watcher's
// pace, slower while a kept-alive sandbox is idle or its tree is large.
func (l *limiter) watchTasks(tc *taskCounter, limit int64) {
	defer l.wg.Done()
	t := time.NewTimer(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.busy:
		case <-t.C:
		}
		next := watchEvery
		if l.idle != nil && l.idle() {
			next = idleWatchEvery
		}
		began := time.Now()
		n, err := tc.count(int(limit))
		// Each task costs a few reads of /proc: a large tree is counted
		// less often, for at most about 1/countShare of a core.
		t.Reset(max(next, countShare*time.Since(began)))
		if err != nil {
			continue
		}
		if int64(n) >= limit {
			l.tripWith("pids", fmt.Sprintf("cordon counted %d tasks (processes and threads) in the sandbox, all that RLIMIT_NPROC lets it hold: its next fork would fail", n))
			return
		}
	}
}
