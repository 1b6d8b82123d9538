package probe

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// child is how a child of the probe ended: the result line it printed,
// its wait status and the start of what it wrote on stderr.
type child struct {
	out    string
	ws     unix.WaitStatus
	stderr string
}

// unreported describes a child that printed no result line.
func (c child) unreported() string {
	how := fmt.Sprintf("exited with status %d", c.ws.ExitStatus())
	if c.ws.Signaled() {
		how = fmt.Sprintf("was killed by %v", c.ws.Signal())
	}
	msg := "the child " + how + " without a report"
	if c.stderr != "" {
		msg += "; it wrote: " + c.stderr
	}
	return msg
}

// maxChildStderr is how much of a child's stderr is kept.
const maxChildStderr = 512

// runChild runs `cordon __probe --attack NAME ARGS` in a child of the probe,
// with stdin as its fd 0 (and, when stdin is set, as its controlling
// terminal in a new session), and returns the result line it printed and
// how it ended. The child is killed after ten seconds.
func runChild(stdin *os.File, name string, args ...string) (child, error) {
	var c child
	r, w, err := os.Pipe()
	if err != nil {
		return c, err
	}
	defer r.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		w.Close()
		return c, err
	}
	defer er.Close()
	attr := &syscall.ProcAttr{Files: []uintptr{^uintptr(0), w.Fd(), ew.Fd()}}
	if stdin != nil {
		attr.Files[0] = stdin.Fd()
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	pid, err := syscall.ForkExec("/proc/self/exe", append([]string{"cordon", ProbeArg, "--attack", name}, args...), attr)
	w.Close()
	ew.Close()
	if err != nil {
		return c, err
	}
	timer := time.AfterFunc(10*time.Second, func() { unix.Kill(pid, unix.SIGKILL) })
	defer timer.Stop()
	var stderr bytes.Buffer
	done := make(chan struct{})
	go func() {
		stderr.ReadFrom(io.LimitReader(er, maxChildStderr))
		io.Copy(io.Discard, er)
		close(done)
	}()
	var out bytes.Buffer
	out.ReadFrom(io.LimitReader(r, 64<<10))
	io.Copy(io.Discard, r)
	<-done
	if _, err := unix.Wait4(pid, &c.ws, 0, nil); err != nil {
		return c, err
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	if l, ok := strings.CutPrefix(line, "attack: "); ok {
		c.out = l
	}
	c.stderr = strings.TrimSpace(stderr.String())
	return c, nil
}

// openPTY opens a new pseudo-terminal pair of the sandbox's own devpts.
func openPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlocking the terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// probeTTY makes a terminal the controlling terminal of a child and has the
// child try each op on it; any that reaches the kernel is the escape (on
// the host's terminal, TIOCSTI types commands into the user's shell).
func probeTTY(ops ...string) func(*Targets) (Status, string) {
	return func(*Targets) (Status, string) {
		m, s, err := openPTY()
		if err != nil {
			return Error, "no terminal to try it on: " + err.Error()
		}
		defer m.Close()
		defer s.Close()
		var seen []string
		for _, op := range ops {
			c, err := runChild(s, "tty", op)
			switch {
			case err != nil:
				return Error, err.Error()
			case c.ws.Signaled():
				seen = append(seen, fmt.Sprintf("%s: killed by %v", op, c.ws.Signal()))
			case c.out == "EPERM":
				seen = append(seen, op+": EPERM")
			case c.out == "":
				return Error, op + ": " + c.unreported()
			default:
				// "ok", or an error only the ioctl itself returns.
				return Escaped, fmt.Sprintf("%s on the controlling terminal reached the kernel: %s", op, c.out)
			}
		}
		return Contained, strings.Join(seen, ", ")
	}
}
