package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Terminal is the pseudo-terminal of a command of a Box: allocated by the
// sandbox's init in the sandbox's own devpts (so that ttyname, job control
// and window sizes work inside, and the host's terminals stay out of
// reach), sized Rows x Cols, then resized and signalled through its
// channels while the command runs.
type Terminal struct {
	Rows, Cols uint16
	// Resize receives new sizes; Signal signals for the command's process
	// group. Either may be nil.
	Resize <-chan Winsize
	Signal <-chan syscall.Signal
}

// Winsize is a terminal's size.
type Winsize struct{ Rows, Cols uint16 }

// hand gives the command to init: with its pipes as stdin, stdout and
// stderr; or, on a terminal, with a socket on which init sends back the
// terminal's master, which is then relayed to and from the pipes (stdin
// and stdout; stderr is the terminal too, and gets nothing).
func (c *command) hand(e ExecOptions, stdin, outW, errW *os.File) error {
	x := c.box
	req := Request{ID: c.id, Op: "exec", Args: e.Args, Env: e.Env, Dir: e.Dir, SelfExec: e.SelfExec}
	if e.Terminal == nil {
		return x.send(req, stdin, outW, errW)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("terminal socket: %w", err)
	}
	mine, peer := os.NewFile(uintptr(fds[0]), "terminal"), os.NewFile(uintptr(fds[1]), "terminal-peer")
	defer mine.Close()
	req.TTY, req.Rows, req.Cols = true, e.Terminal.Rows, e.Terminal.Cols
	err = x.send(req, peer)
	peer.Close()
	if err != nil {
		return err
	}
	// Init answers at once: the master, or nothing when the command could
	// not start (its exec-error status says why).
	master, err := wire.RecvFD(mine)
	if err != nil {
		return nil
	}
	in, err := dupFile(stdin)
	if err != nil {
		master.Close()
		return err
	}
	out, err := dupFile(outW)
	if err != nil {
		master.Close()
		in.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		io.Copy(out, master) // ends with EIO once no process holds the terminal
		out.Close()
		close(done)
	}()
	go func() {
		io.Copy(master, in)
		in.Close()
	}()
	go func() {
		defer master.Close()
		for {
			select {
			case <-done:
				return
			case ws := <-e.Terminal.Resize:
				unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
			case sig := <-e.Terminal.Signal:
				x.send(Request{ID: c.id, Op: "signal", Signal: int(sig)})
			}
		}
	}()
	return nil
}

// dupFile duplicates f, close-on-exec.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicating %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Connect opens a TCP connection to 127.0.0.1:port inside the sandbox's
// network namespace: the sandbox's init connects and passes the socket
// back over the control socket, so the host side reaches the sandbox's
// loopback without entering its namespace, and the sandbox gains no way
// out. It waits for the connection until ctx ends.
func (x *Box) Connect(ctx context.Context, port int) (net.Conn, error) {
	if x.Ended() {
		return nil, ErrEnded
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("connect socket: %w", err)
	}
	mine, peer := os.NewFile(uintptr(fds[0]), "connect"), os.NewFile(uintptr(fds[1]), "connect-peer")
	defer mine.Close()
	x.mu.Lock()
	x.nextID++
	id := x.nextID
	x.mu.Unlock()
	err = x.send(Request{ID: id, Op: "connect", Port: port}, peer)
	peer.Close()
	if err != nil {
		if x.Ended() {
			return nil, ErrEnded
		}
		return nil, fmt.Errorf("asking the sandbox to connect: %w", err)
	}
	uc, err := net.FileConn(mine)
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	if d, ok := ctx.Deadline(); ok {
		uc.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { uc.SetReadDeadline(time.Now()) })
	defer stop()
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.(*net.UnixConn).ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("waiting for the sandbox's connection: %w", err)
	}
	if n == 0 {
		return nil, ErrEnded
	}
	if buf[0] != 0 {
		closeRights(oob[:oobn])
		return nil, &ConnectError{Msg: string(buf[1:n])}
	}
	f, err := oneRight(oob[:oobn])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := isTCP(f); err != nil {
		return nil, err
	}
	if err := awaitConnect(ctx, f); err != nil {
		return nil, &ConnectError{Msg: fmt.Sprintf("connecting to 127.0.0.1:%d: %v", port, err)}
	}
	return net.FileConn(f)
}

// ConnectError is a connection the sandbox could not make (nothing
// listens on the port, a bad port).
type ConnectError struct{ Msg string }

func (e *ConnectError) Error() string { return e.Msg }

// awaitConnect waits until the non-blocking connect of f completes, and
// returns its result.
func awaitConnect(ctx context.Context, f *os.File) error {
	for {
		pfd := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n > 0 {
			soerr, err := unix.GetsockoptInt(int(f.Fd()), unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				return err
			}
			if soerr != 0 {
				return unix.Errno(soerr)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// oneRight is the one descriptor passed in oob.
func oneRight(oob []byte) (*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("the sandbox passed no socket")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New("the sandbox passed no socket")
	}
	return os.NewFile(uintptr(fds[0]), "sandbox-conn"), nil
}

// closeRights closes any descriptors passed in oob.
func closeRights(oob []byte) {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	for _, m := range msgs {
		fds, _ := unix.ParseUnixRights(&m)
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// isTCP checks that what the sandbox passed is a TCP socket over IPv4, as
// asked, before the host side uses it.
func isTCP(f *os.File) error {
	fd := int(f.Fd())
	domain, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	proto, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err := errors.Join(err1, err2, err3); err != nil || domain != unix.AF_INET || typ != unix.SOCK_STREAM || proto != unix.IPPROTO_TCP {
		return fmt.Errorf("the sandbox passed something other than a TCP socket (%d/%d/%d, %v)", domain, typ, proto, err)
	}
	return nil
}
