package nsinit

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// serve is init's loop in a kept-alive sandbox: it runs each command the
// host side sends on the control socket, with the descriptors that came with
// the request as its stdin, stdout and stderr, and reports its end (or why it
// could not start). A command's process group is killed when the command exits; what it
// left in files stays for the next one. When the host side closes the
// socket, every process of the sandbox is killed and init exits.
//
// The loop runs on init's main thread, whose capability sets confine
// emptied and from which commands must be forked and signals sent (see
// startCommand and supervise), and waits there in poll(2) on the control
// socket and a pidfd per command: no goroutine, signal handler or thread
// hand-off stands between a request or an exit and its answer.
func serve(spec *wire.Spec) error {
	ctl := os.NewFile(wire.ControlFD, "control")
	send := func(s wire.Status) { wire.SendMessage(ctl, s) }
	type command struct {
		id    uint64
		pidfd int
	}
	running := map[int]command{} // pid -> command
	groups := map[uint64]int{}   // request -> pid
	fds := make([]unix.PollFd, 0, 16)
	soon := 0 // polls left with a short timeout
	for {
		fds = append(fds[:0], unix.PollFd{Fd: int32(wire.ControlFD), Events: unix.POLLIN})
		for _, c := range running {
			fds = append(fds, unix.PollFd{Fd: int32(c.pidfd), Events: unix.POLLIN})
		}
		// The timeout reaps what commands left behind and then exited:
		// soon after a command's group was killed, what was left of it is
		// reaped at once, so that the sandbox is seen idle (no process but
		// init) when it is.
		timeout := 1000
		if soon > 0 {
			timeout, soon = 10, soon-1
		}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			unix.Kill(-1, unix.SIGKILL)
			return fmt.Errorf("waiting for requests: %w", err)
		}
		// Reap every child that ended: a command's end is reported, a
		// leftover's only reaped.
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			c, ok := running[pid]
			if !ok {
				continue
			}
			delete(running, pid)
			delete(groups, c.id)
			unix.Close(c.pidfd)
			unix.Kill(-pid, unix.SIGKILL)
			soon = 20
			st := wire.Status{ID: c.id, Event: "exit", Pid: pid, TmpUsed: tmpUsed(spec)}
			if ws.Signaled() {
				st.Signal = int(ws.Signal())
			} else {
				st.Code = ws.ExitStatus()
			}
			send(st)
		}
		ev := fds[0].Revents
		if ev&unix.POLLIN == 0 {
			if ev&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				unix.Kill(-1, unix.SIGKILL)
				return nil
			}
			continue
		}
		var req wire.Request
		files, err := wire.RecvMessage(ctl, &req)
		if errors.Is(err, wire.ErrPeerGone) {
			unix.Kill(-1, unix.SIGKILL)
			return nil
		}
		if err != nil {
			continue // a malformed message; its descriptors are closed
		}
		switch req.Op {
		case "exec":
			pid, err := execRequest(spec, req, files)
			for _, f := range files {
				f.Close()
			}
			if err != nil {
				code := 127
				if !errors.Is(err, os.ErrNotExist) {
					code = 126
				}
				send(wire.Status{ID: req.ID, Event: "exec-error", Error: err.Error(), Code: code})
				continue
			}
			pidfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				unix.Kill(-pid, unix.SIGKILL)
				send(wire.Status{ID: req.ID, Event: "exec-error", Error: fmt.Sprintf("watching the command: %v", err), Code: 126})
				continue
			}
			unix.CloseOnExec(pidfd)
			// No word of the start: the command's end, or its failure to
			// start, is the only answer (one message less on the way).
			running[pid], groups[req.ID] = command{req.ID, pidfd}, pid
		case "connect":
			connectRequest(req, files)
			for _, f := range files {
				f.Close()
			}
		case "signal":
			if pid, ok := groups[req.ID]; ok && req.Signal > 0 {
				unix.Kill(-pid, syscall.Signal(req.Signal))
			}
		default:
			for _, f := range files {
				f.Close()
			}
		}
	}
}

// execRequest starts the command of a request, like startCommand, with the
// request's descriptors as its stdio.
func execRequest(spec *wire.Spec, req wire.Request, files []*os.File) (int, error) {
	if want := map[bool]int{false: 3, true: 1}[req.TTY]; len(files) != want {
		return 0, fmt.Errorf("exec request with %d descriptors, not %d", len(files), want)
	}
	s := *spec
	s.Args, s.SelfExec, s.TTY = req.Args, req.SelfExec, false
	if req.Dir != "" {
		s.Workdir = req.Dir
	}
	for _, kv := range req.Env {
		name, value, _ := strings.Cut(kv, "=")
		s.Env = wire.SetEnv(s.Env, name, value)
	}
	s.Path = wire.PathOf(s.Env)
	if req.TTY {
		return startOnTerminal(&s, req, files[0])
	}
	return startCommand(&s, files)
}
