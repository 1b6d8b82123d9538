package nsinit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// startOnTerminal starts the command of an exec request with TTY on a
// pseudo-terminal of the sandbox's own devpts (as cordon run does): its
// master goes back to the host side on sock, sized as the request says;
// the command gets the peer as its stdin, stdout, stderr and controlling
// terminal.
func startOnTerminal(s *wire.Spec, req wire.Request, sock *os.File) (int, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("allocating a terminal: %w", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return 0, fmt.Errorf("unlocking the terminal: %w", err)
	}
	if req.Rows > 0 && req.Cols > 0 {
		unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: req.Rows, Col: req.Cols})
	}
	pfd, _, errno := unix.Syscall(unix.SYS_IOCTL, master.Fd(), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return 0, fmt.Errorf("opening the terminal's peer: %w", errno)
	}
	peer := os.NewFile(pfd, "tty")
	defer peer.Close()
	if err := wire.SendFD(sock, master); err != nil {
		return 0, fmt.Errorf("sending the terminal: %w", err)
	}
	s.TTY = true
	return startCommand(s, []*os.File{peer, peer, peer})
}

// connectRequest connects to 127.0.0.1:Port in the sandbox's network
// namespace and sends the socket back on the request's one descriptor
// (tag 0), or why it could not (tag 1, the reason as text). The connect
// does not block: the host side waits for it to complete, so that a port
// whose backlog is full cannot stall init.
func connectRequest(req wire.Request, files []*os.File) {
	if len(files) != 1 {
		return
	}
	reply := func(err error) {
		unix.Sendmsg(int(files[0].Fd()), append([]byte{1}, err.Error()...), nil, nil, unix.MSG_DONTWAIT)
	}
	if req.Port < 1 || req.Port > 65535 {
		reply(fmt.Errorf("port %d: want 1 to 65535", req.Port))
		return
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		reply(fmt.Errorf("socket: %w", err))
		return
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: req.Port, Addr: [4]byte{127, 0, 0, 1}}); err != nil && err != unix.EINPROGRESS {
		reply(fmt.Errorf("connecting to 127.0.0.1:%d: %w", req.Port, err))
		return
	}
	unix.Sendmsg(int(files[0].Fd()), []byte{0}, unix.UnixRights(fd), nil, unix.MSG_DONTWAIT)
}
