package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inPidNS runs argv as pid 1 of a new pid namespace with its own /proc,
// as a sandbox's init is, and returns its host pid and the command.
func inPidNS(t *testing.T, argv ...string) (int, *exec.Cmd) {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("a pid namespace of its own needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare is not installed")
	}
	cmd := exec.Command("unshare", append([]string{"--pid", "--fork", "--mount-proc", "--kill-child"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(-cmd.Process.Pid, unix.SIGKILL); cmd.Wait() })
	// unshare's one child is the namespace's init.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			pid, _ := strconv.Atoi(f[0])
			// Until it has mounted its /proc, the counter waits.
			return pid, cmd
		}
	}
	t.Fatal("no init in the new pid namespace")
	return 0, nil
}

// countUntil counts until at least want tasks are seen, and returns the
// count then.
func countUntil(t *testing.T, tc *taskCounter, want int) int {
	t.Helper()
	var n int
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err = tc.count(1 << 20); err == nil && n >= want {
			return n
		}
	}
	t.Fatalf("counted %d tasks (%v), want %d", n, err, want)
	return 0
}

// The counter finds every task of the namespace, threads included, and
// stops counting past the bound it is given; once init has ended, none.
func TestTaskCounter(t *testing.T) {
	pid, cmd := inPidNS(t, "sh", "-c", "sleep 60 & sleep 60 & (sleep 60 & wait) & python3 -c 'import threading, time\nfor i in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\ntime.sleep(60)' & wait")
	tc, err := newTaskCounter(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.close()
	// sh, two sleeps, a subshell and its sleep, python and its three
	// threads: nine, once all have started.
	var seen []int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := tc.count(1 << 20)
		if err == nil && n == 9 {
			break
		}
		seen = append(seen, n)
		if time.Now().After(deadline) {
			t.Fatalf("counted %v tasks, want 9", seen)
		}
	}
	if n, _ := tc.count(2); n < 3 || n >= 9 {
		t.Errorf("a count to stop past 2 went on to %d", n)
	}
	// init ends: the namespace empties, and its /proc lists nothing, even
	// if its pid is another's now.
	unix.Kill(pid, unix.SIGKILL)
	cmd.Wait()
	if n, err := tc.count(1 << 20); n != 0 {
		t.Errorf("after init ended, counted %d tasks (%v)", n, err)
	}
}

// A /proc reached through init's pid is taken only when it is the
// namespace's read at the start: not the host's, not another's.
func TestTaskCounterRefusesAnotherProc(t *testing.T) {
	pid, _ := inPidNS(t, "sleep", "60")
	tc, err := newTaskCounter(pid)
	if err != nil {
		t.Fatal(err)
	}
	countUntil(t, tc, 1)
	tc.close()
	tc.ns++ // as if init's pid were another process's now
	if _, err := tc.count(10); err == nil {
		t.Error("a /proc of another pid namespace was counted")
	}
	self, err := newTaskCounter(os.Getpid()) // the host's own /proc
	if err != nil {
		t.Fatal(err)
	}
	self.ns++
	if _, err := self.count(10); err == nil {
		t.Error("the host's /proc was taken as a sandbox's")
	}
}

// A fork bomb of hoppers (each forks its successor, then exits; at the
// limit its fork fails and it tries again) holds the namespace at
// RLIMIT_NPROC while its processes change parents all the time: the count
// follows it to the limit, or to within the forks under way, which the
// kernel counts before /proc lists them (a few per core). Either way the
// run's peak_processes says how near it came.
func TestTaskCounterHoppingForkBomb(t *testing.T) {
	python := "/usr/bin/python3"
	if st, err := os.Stat(python); err != nil || st.Mode()&0o001 == 0 {
		t.Skip("no python3 that nobody may run")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv is not installed")
	}
	const limit = 256
	// Where nobody may note a refused fork.
	dir, err := os.MkdirTemp("", "hop")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	// init's part, reaping, as cordon's init does; the command's, a child
	// of it that starts the hoppers and then waits.
	script := `
import os, resource, sys, time
limit, flag = int(sys.argv[1]), sys.argv[2]
resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
stop = time.time() + 30
def hop():
    while time.time() < stop:
        try:
            pid = os.fork()
        except OSError:
            try:
                os.close(os.open(flag, os.O_CREAT | os.O_WRONLY, 0o644))
            except OSError:
                pass
            continue
        if pid:
            os._exit(0)
    os._exit(0)
if os.fork() == 0:
    started = 0
    while started < limit + 50 and time.time() < stop:
        try:
            if os.fork() == 0:
                hop()
            started += 1
        except OSError:
            time.sleep(0.001)
    time.sleep(max(0, stop - time.time()))
    os._exit(0)
while time.time() < stop + 1:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.01)
`
	pid, _ := inPidNS(t, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script, strconv.Itoa(limit), filepath.Join(dir, "refused"))
	tc, err := newTaskCounter(pid)
	if err != nil {
		t.Fatal(err)
	}
	l := &limiter{stop: make(chan struct{}), busy: make(chan struct{}, 1)}
	l.kill = func() {}
	l.wg.Add(1)
	go l.watchTasks(tc, limit)
	began := time.Now()
	deadline := began.Add(25 * time.Second)
	near := int64(limit - 16)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		peak := l.peakTasks
		l.mu.Unlock()
		if k, _ := l.trippedWith(); k != "" || peak >= near {
			t.Logf("tripped %q, counted %d, after %v", k, peak, time.Since(began).Round(time.Millisecond))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(l.stop)
	l.wg.Wait()
	if _, err := os.Stat(filepath.Join(dir, "refused")); err != nil {
		t.Skip("the hoppers never reached the limit: no fork was refused")
	}
	if k, _ := l.trippedWith(); k != "pids" && l.peakTasks < near {
		t.Errorf("the bomb held every task RLIMIT_NPROC=%d allows (its forks were refused), and the count came to %d at most", limit, l.peakTasks)
	}
}

// The count's pace holds whatever wakes the watcher: a command started
// every 2 ms does not make it count back to back.
func TestTaskCounterPace(t *testing.T) {
	pid, _ := inPidNS(t, "python3", "-c", "import threading, time\nfor i in range(600): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\ntime.sleep(60)")
	tc, err := newTaskCounter(pid)
	if err != nil {
		t.Fatal(err)
	}
	countUntil(t, tc, 601)
	cpu := func() time.Duration {
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	l := &limiter{stop: make(chan struct{}), busy: make(chan struct{}, 1)}
	l.kill = func() {}
	l.wg.Add(1)
	go l.watchTasks(tc, 1<<30)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				l.started()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	c0, w0 := cpu(), time.Now()
	time.Sleep(2 * time.Second)
	share := float64(cpu()-c0) / float64(time.Since(w0))
	close(done)
	close(l.stop)
	l.wg.Wait()
	if bound := 3.0 / countShare; share > bound {
		t.Errorf("with a command started every 2 ms the count took %.0f%% of a core, past %.0f%%", 100*share, 100*bound)
	}
}
