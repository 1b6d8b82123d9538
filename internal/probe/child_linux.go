package probe

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runChild runs `cordon __probe --attack NAME ARGS` in a child of the probe,
// with stdin as its fd 0 (and, when stdin is set, as its controlling
// terminal in a new session), and returns the result line it printed and
// how it ended. The child is killed after ten seconds.
func runChild(stdin *os.File, name string, args ...string) (string, unix.WaitStatus, error) {
	var ws unix.WaitStatus
	r, w, err := os.Pipe()
	if err != nil {
		return "", ws, err
	}
	defer r.Close()
	attr := &syscall.ProcAttr{Files: []uintptr{^uintptr(0), w.Fd(), 2}}
	if stdin != nil {
		attr.Files[0] = stdin.Fd()
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	pid, err := syscall.ForkExec("/proc/self/exe", append([]string{"cordon", ProbeArg, "--attack", name}, args...), attr)
	w.Close()
	if err != nil {
		return "", ws, err
	}
	timer := time.AfterFunc(10*time.Second, func() { unix.Kill(pid, unix.SIGKILL) })
	defer timer.Stop()
	var out bytes.Buffer
	out.ReadFrom(r)
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		return "", ws, err
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	return strings.TrimPrefix(line, "attack: "), ws, nil
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
			out, ws, err := runChild(s, "tty", op)
			switch {
			case err != nil:
				return Error, err.Error()
			case ws.Signaled():
				seen = append(seen, fmt.Sprintf("%s: killed by %v", op, ws.Signal()))
			case out == "EPERM":
				seen = append(seen, op+": EPERM")
			default:
				return Escaped, fmt.Sprintf("%s on the controlling terminal reached the kernel: %s", op, out)
			}
		}
		return Contained, strings.Join(seen, ", ")
	}
}
