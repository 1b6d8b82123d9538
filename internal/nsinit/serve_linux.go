package nsinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// serve is init's loop in a kept-alive sandbox: it runs each command the
// host side sends on the control socket, with the descriptors that came with
// the request as its stdin, stdout and stderr, and reports its start and its
// end. A command's process group is killed when the command exits; what it
// left in files stays for the next one. When the host side closes the
// socket, or init is told to terminate, every process of the sandbox is
// killed and init exits.
//
// Commands are forked, and signals sent, from this goroutine, locked to the
// thread whose capability sets confine emptied (see startCommand and
// supervise).
func serve(spec *sandbox.Spec, sigs <-chan os.Signal) error {
	ctl := os.NewFile(sandbox.ControlFD, "control")
	send := func(s sandbox.Status) { sandbox.SendMessage(ctl, s) }
	children := make(chan os.Signal, 1)
	signal.Notify(children, unix.SIGCHLD)

	type request struct {
		req   sandbox.Request
		files []*os.File
	}
	reqs := make(chan request)
	go func() {
		defer close(reqs)
		for {
			var r request
			files, err := sandbox.RecvMessage(ctl, &r.req)
			if errors.Is(err, sandbox.ErrPeerGone) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.ECONNRESET) {
				return
			}
			if err != nil {
				continue // a malformed message; its descriptors are closed
			}
			r.files = files
			reqs <- r
		}
	}()

	running := map[int]uint64{} // pid -> request
	groups := map[uint64]int{}  // request -> pid
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				unix.Kill(-1, unix.SIGKILL)
				return nil
			}
			switch r.req.Op {
			case "exec":
				pid, err := execRequest(spec, r.req, r.files)
				for _, f := range r.files {
					f.Close()
				}
				if err != nil {
					code := 127
					if !errors.Is(err, os.ErrNotExist) {
						code = 126
					}
					send(sandbox.Status{ID: r.req.ID, Event: "exec-error", Error: err.Error(), Code: code})
					continue
				}
				running[pid], groups[r.req.ID] = r.req.ID, pid
				send(sandbox.Status{ID: r.req.ID, Event: "started", Pid: pid})
			case "signal":
				if pid, ok := groups[r.req.ID]; ok && r.req.Signal > 0 {
					unix.Kill(-pid, syscall.Signal(r.req.Signal))
				}
			}
		case <-children:
			for {
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil || pid <= 0 {
					break
				}
				id, ok := running[pid]
				if !ok {
					continue // a process a command left behind
				}
				delete(running, pid)
				delete(groups, id)
				unix.Kill(-pid, unix.SIGKILL)
				st := sandbox.Status{ID: id, Event: "exit", TmpUsed: tmpUsed(spec)}
				if ws.Signaled() {
					st.Signal = int(ws.Signal())
				} else {
					st.Code = ws.ExitStatus()
				}
				send(st)
			}
		case s := <-sigs:
			if s == unix.SIGTERM || s == unix.SIGINT {
				unix.Kill(-1, unix.SIGKILL)
				return nil
			}
		}
	}
}

// execRequest starts the command of a request, like startCommand, with the
// request's descriptors as its stdio.
func execRequest(spec *sandbox.Spec, req sandbox.Request, files []*os.File) (int, error) {
	if len(files) != 3 {
		return 0, fmt.Errorf("exec request with %d descriptors, not 3", len(files))
	}
	s := *spec
	s.Args, s.SelfExec, s.TTY = req.Args, req.SelfExec, false
	if req.Dir != "" {
		s.Workdir = req.Dir
	}
	for _, kv := range req.Env {
		s.Env = setEnv(s.Env, kv)
	}
	for _, kv := range s.Env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			s.Path = kv[5:]
		}
	}
	return startCommand(&s, files)
}

// setEnv sets the variable of kv ("NAME=value") in env.
func setEnv(env []string, kv string) []string {
	name := kv
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			name = kv[:i+1]
			break
		}
	}
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if len(e) < len(name) || e[:len(name)] != name {
			out = append(out, e)
		}
	}
	return append(out, kv)
}
