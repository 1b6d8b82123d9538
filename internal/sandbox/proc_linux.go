package sandbox

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// process is a child started with syscall.ForkExec. cordon does not use
// os/exec for its own children: its first use in a process forks an extra
// child to probe for pidfd support, which costs every sandbox a fork.
type process struct {
	pid    int
	mu     sync.Mutex
	reaped bool
}

// start forks and execs path with files as its descriptors 0, 1, 2, ...; a
// nil file, or a missing one of 0-2, leaves that descriptor closed (cordon's
// own stdout and stderr, which are not close-on-exec, would otherwise reach
// its helpers and hold a caller's pipe open).
func start(path string, args []string, files []*os.File, sys *syscall.SysProcAttr) (*process, error) {
	for len(files) < 3 {
		files = append(files, nil)
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = ^uintptr(0)
		if f != nil {
			fds[i] = f.Fd()
		}
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{Env: []string{}, Files: fds, Sys: sys})
	if err != nil {
		return nil, err
	}
	return &process{pid: pid}, nil
}

// signal sends sig unless the process was already reaped (its pid may then
// belong to another process).
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		unix.Kill(p.pid, sig)
	}
}

// wait reaps the process and returns its status and resource usage, which
// includes that of every descendant it reaped.
func (p *process) wait() (unix.WaitStatus, *unix.Rusage, error) {
	var ws unix.WaitStatus
	var ru unix.Rusage
	for {
		_, err := unix.Wait4(p.pid, &ws, 0, &ru)
		if errors.Is(err, unix.EINTR) || (err == nil && ws.Stopped()) {
			continue // a traced child reports its stops too
		}
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		if err != nil {
			return ws, nil, err
		}
		return ws, &ru, nil
	}
}

// kill kills the process and reaps it.
func (p *process) kill() {
	p.signal(unix.SIGKILL)
	p.wait()
}

// devNull returns f, or /dev/null when f is nil.
func devNull(f *os.File) (*os.File, error) {
	if f != nil {
		return f, nil
	}
	return os.OpenFile(os.DevNull, os.O_RDWR, 0)
}
