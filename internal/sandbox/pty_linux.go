package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// terminal relays between cordon's own terminal and a pseudo-terminal that
// the sandbox init allocated in the sandbox's own devpts, whose master end it
// passed back over a socket (so that ttyname, job control and window sizes
// work inside). The sandbox never holds the user's terminal, so it cannot
// push input into it or reach the session it belongs to; TIOCSTI and
// TIOCLINUX are refused by seccomp as well.
type terminal struct {
	host   *os.File  // cordon's stdin, a terminal
	out    io.Writer // cordon's stdout
	sock   *os.File  // cordon's end of the socket the master arrives on
	Peer   *os.File  // init's end, passed as ConsoleFD
	master *os.File
	saved  *unix.Termios
	done   chan struct{}
	winch  chan os.Signal
	closed sync.Once
}

// isTerminal reports whether f is a terminal.
// UsesTerminal reports whether a run with these stdin and stdout gets a
// terminal of its own (both are terminals).
func UsesTerminal(stdin, stdout *os.File) bool { return isTerminal(stdin) && isTerminal(stdout) }

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool { return isTerminal(f) }

func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newTerminal prepares the socket the sandbox's pty master will come back on.
func newTerminal(host *os.File, out io.Writer) (*terminal, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("console socket: %w", err)
	}
	return &terminal{host: host, out: out, sock: os.NewFile(uintptr(fds[0]), "console"),
		Peer: os.NewFile(uintptr(fds[1]), "console-peer"), done: make(chan struct{})}, nil
}

// start receives the master, sizes it like the host terminal, acknowledges
// (init starts the command only then), puts the host terminal in raw mode and
// relays in both directions.
func (t *terminal) start() error {
	t.Peer.Close()
	master, err := wire.RecvFD(t.sock)
	if err != nil {
		close(t.done)
		return fmt.Errorf("receiving the sandbox terminal: %w", err)
	}
	t.master = master
	t.resize()
	if _, err := t.sock.Write([]byte{1}); err != nil {
		close(t.done)
		return fmt.Errorf("acknowledging the sandbox terminal: %w", err)
	}
	if saved, err := unix.IoctlGetTermios(int(t.host.Fd()), unix.TCGETS); err == nil {
		raw := *saved
		raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		raw.Oflag &^= unix.OPOST
		raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		raw.Cflag &^= unix.CSIZE | unix.PARENB
		raw.Cflag |= unix.CS8
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
		if unix.IoctlSetTermios(int(t.host.Fd()), unix.TCSETS, &raw) == nil {
			t.saved = saved
		}
	}
	t.winch = make(chan os.Signal, 1)
	signal.Notify(t.winch, unix.SIGWINCH)
	go func() {
		for range t.winch {
			t.resize()
		}
	}()
	go io.Copy(t.master, t.host)
	go func() {
		io.Copy(t.out, t.master) // ends with EIO when the sandbox is gone
		close(t.done)
	}()
	return nil
}

func (t *terminal) resize() {
	if ws, err := unix.IoctlGetWinsize(int(t.host.Fd()), unix.TIOCGWINSZ); err == nil {
		unix.IoctlSetWinsize(int(t.master.Fd()), unix.TIOCSWINSZ, ws)
	}
}

// close waits for the output to drain and restores the host terminal;
// later calls do nothing.
func (t *terminal) close() { t.closed.Do(t.doClose) }

func (t *terminal) doClose() {
	t.Peer.Close()
	t.sock.Close()
	if t.master == nil {
		return
	}
	<-t.done
	signal.Stop(t.winch)
	close(t.winch)
	if t.saved != nil {
		unix.IoctlSetTermios(int(t.host.Fd()), unix.TCSETS, t.saved)
	}
	t.master.Close()
}
