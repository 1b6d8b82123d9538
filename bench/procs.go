package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// What a run touched, measured two ways. The whole run: the rusage of the
// tool's process tree, from the wait for the tool's process (which counts
// every descendant waited for inside the tree) and from the wait for each
// process orphaned on the way (the harness is their subreaper while it
// measures). Per process: the tool runs traced (ptrace, stopping each of its
// processes only as it starts a process or thread, execs or exits), and
// each process's minor page faults and peak resident memory are read from
// /proc as it exits, while its memory is still mapped.

// usage is what a run or one process touched.
type usage struct {
	minflt int64 // minor page faults
	rssKiB int64 // peak resident memory, KiB
}

// subreaper makes this process the subreaper of everything it starts, so
// that an orphan of a measured tool is waited for here, and returns the
// function that undoes it.
func subreaper() (func(), error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("becoming the subreaper: %w", err)
	}
	return func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }, nil
}

// orphanWait is how long the orphans of one run may outlive it.
var orphanWait = 10 * time.Second

// reapOrphans waits for the processes a finished run left behind (orphans
// handed to this process as their subreaper) and adds what they touched to
// u: faults add up, peak memory is the largest. It polls, so that an orphan
// that never ends costs orphanWait, not the benchmark.
func reapOrphans(u *usage) error {
	deadline := time.Now().Add(orphanWait)
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("waiting for orphans: %w", err)
		case pid > 0:
			u.add(&ru)
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("an orphan of the run was still running after %v", orphanWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// add counts a rusage from wait4 into u.
func (u *usage) add(ru *syscall.Rusage) {
	u.minflt += ru.Minflt
	u.rssKiB = max(u.rssKiB, ru.Maxrss)
}

// runUsage is what a finished command's process tree touched, from its
// wait.
func runUsage(cmd *exec.Cmd) usage {
	var u usage
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.add(ru)
	}
	return u
}

// proc is one process of a traced run.
type proc struct {
	pid  int
	name string // argv[0]'s base name, with the hidden entry point's argument (cordon __init)
	usage
}

// traceRun runs argv traced and returns its processes in the order they
// started, each with its minor page faults and peak resident memory as it
// exited. The command's output is discarded.
func traceRun(argv []string) ([]proc, error) {
	// ptrace answers only the thread that traces.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	undo, err := subreaper()
	if err != nil {
		return nil, err
	}
	defer undo()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s traced: %w", argv[0], err)
	}
	defer cmd.Process.Release()
	root := cmd.Process.Pid
	var ws syscall.WaitStatus
	// The tracee stops at its exec.
	if _, err := wait4(root, &ws); err != nil {
		return nil, err
	}
	if !ws.Stopped() {
		return nil, fmt.Errorf("%s did not stop at its exec (wait status %#x)", argv[0], ws)
	}
	opts := unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK |
		unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_EXITKILL
	if err := syscall.PtraceSetOptions(root, opts); err != nil {
		return nil, fmt.Errorf("tracing %s: %w", argv[0], err)
	}
	t := tracer{byPid: map[int]*proc{}, started: map[int]bool{root: true}, alive: map[int]bool{}}
	t.seen(root)
	if err := syscall.PtraceCont(root, 0); err != nil {
		return nil, fmt.Errorf("resuming %s: %w", argv[0], err)
	}
	// Every traced thread, and every orphan handed over, is waited for
	// here: the run is over when none is left.
	for {
		tid, err := wait4(-1, &ws)
		if errors.Is(err, syscall.ECHILD) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !ws.Stopped() {
			// Exited: its figures were read at its exit stop. Once the
			// tool's process is gone, what it left behind has
			// orphanWait to end.
			t.ended(tid)
			if tid == root {
				stop := time.AfterFunc(orphanWait, t.killAll)
				defer stop.Stop()
			}
			continue
		}
		sig := ws.StopSignal()
		inject := 0
		switch {
		case sig == syscall.SIGTRAP && ws.TrapCause() != 0:
			t.event(tid, ws.TrapCause())
		case sig == syscall.SIGSTOP && !t.started[tid]:
			t.started[tid] = true // a new thread or process's first stop
		default:
			inject = int(sig) // a signal for the tracee: deliver it
		}
		// A tracee killed meanwhile cannot be resumed; its exit follows.
		syscall.PtraceCont(tid, inject)
	}
	out := make([]proc, 0, len(t.order))
	for _, pid := range t.order {
		if p := t.byPid[pid]; p.name != "" {
			out = append(out, *p)
		}
	}
	return out, nil
}

// wait4 waits for any traced thread or child, retrying when interrupted.
func wait4(pid int, ws *syscall.WaitStatus) (int, error) {
	for {
		got, err := syscall.Wait4(pid, ws, syscall.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil && !errors.Is(err, syscall.ECHILD) {
			err = fmt.Errorf("waiting for the traced run: %w", err)
		}
		return got, err
	}
}

// tracer keeps the processes of a traced run.
type tracer struct {
	byPid   map[int]*proc
	order   []int        // process ids in the order they started
	started map[int]bool // threads whose first stop has been seen

	mu    sync.Mutex
	alive map[int]bool // processes not yet seen to end
}

// ended notes that a traced thread or process has been waited for.
func (t *tracer) ended(pid int) {
	t.mu.Lock()
	delete(t.alive, pid)
	t.mu.Unlock()
}

// killAll kills every traced process still running, so that a run whose
// orphans never end still ends.
func (t *tracer) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for pid := range t.alive {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// seen records a process the first time it is seen.
func (t *tracer) seen(pid int) *proc {
	p := t.byPid[pid]
	if p == nil {
		p = &proc{pid: pid}
		t.byPid[pid] = p
		t.order = append(t.order, pid)
		t.mu.Lock()
		t.alive[pid] = true
		t.mu.Unlock()
	}
	return p
}

// event handles a ptrace event stop of thread tid.
func (t *tracer) event(tid, cause int) {
	switch cause {
	case unix.PTRACE_EVENT_FORK, unix.PTRACE_EVENT_VFORK, unix.PTRACE_EVENT_CLONE:
		msg, err := syscall.PtraceGetEventMsg(tid)
		if err != nil {
			return
		}
		child := int(msg)
		if tgid, _ := status(child); tgid == child {
			t.seen(child)
		}
	case unix.PTRACE_EVENT_EXIT:
		// The thread is exiting with its process's memory still mapped:
		// the process's figures so far, final at its last thread's exit.
		tgid, rss := status(tid)
		if tgid == 0 {
			return
		}
		p := t.seen(tgid)
		p.rssKiB = max(p.rssKiB, rss)
		p.minflt = max(p.minflt, minflt(tid))
		if name := cmdName(tid); name != "" {
			p.name = name
		}
	}
}

// status reads a thread's process id and its process's peak resident
// memory (VmHWM, KiB) from /proc/TID/status; zeros when it is gone.
func status(tid int) (tgid int, hwmKiB int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "Tgid":
			tgid, _ = strconv.Atoi(f[0])
		case "VmHWM":
			hwmKiB, _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return tgid, hwmKiB
}

// minflt reads the minor page faults of a thread's whole process (every
// thread, living or ended; not its children) from /proc/TID/stat.
func minflt(tid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	// After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags,
	// minflt.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 8 {
		return 0
	}
	n, _ := strconv.ParseInt(f[7], 10, 64)
	return n
}

// cmdName names a process by its argv[0]'s base name, followed by its
// first argument when that is one of cordon's hidden entry points
// (__init, __cleanup, __hold), and falls back to /proc/PID/comm.
func cmdName(tid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/cmdline")
	if err == nil && len(b) > 0 {
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		name := filepath.Base(args[0])
		if len(args) > 1 && strings.HasPrefix(args[1], "__") {
			name += " " + args[1]
		}
		return name
	}
	b, _ = os.ReadFile("/proc/" + strconv.Itoa(tid) + "/comm")
	return strings.TrimSpace(string(b))
}
