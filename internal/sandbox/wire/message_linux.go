package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ControlFD is, in a kept-alive sandbox (Spec.Serve), the socket on which
// init receives Requests and sends back Status messages with their ID. It
// takes the slot of ConsoleFD, which such an init does not use.
const ControlFD = ConsoleFD

// Request is one message from the host side to a kept-alive sandbox's init.
type Request struct {
	ID uint64 `json:"id"`
	// Op is "exec" (three descriptors, the command's stdin, stdout and
	// stderr, come with it; with TTY, one socket instead, on which init
	// sends back the master of the pseudo-terminal it allocated for the
	// command, sized Rows x Cols), "signal" (to the process group of the
	// command started by the request ID) or "connect" (a socket comes with
	// it, on which init sends back a TCP socket connecting to
	// 127.0.0.1:Port inside the sandbox, or why it could not).
	Op       string   `json:"op"`
	Args     []string `json:"args,omitempty"`
	Env      []string `json:"env,omitempty"`
	Dir      string   `json:"dir,omitempty"`
	SelfExec bool     `json:"self_exec,omitempty"`
	Signal   int      `json:"signal,omitempty"`
	TTY      bool     `json:"tty,omitempty"`
	Rows     uint16   `json:"rows,omitempty"`
	Cols     uint16   `json:"cols,omitempty"`
	Port     int      `json:"port,omitempty"`
}

// MaxMessage bounds one control message.
const MaxMessage = 256 << 10

// SendMessage sends v as one JSON datagram on a SOCK_SEQPACKET socket, with
// files passed alongside.
func SendMessage(sock *os.File, v any, files ...*os.File) error {
	b, oob, err := EncodeMessage(v, files)
	if err != nil {
		return err
	}
	return unix.Sendmsg(int(sock.Fd()), b, oob, nil, 0)
}

// EncodeMessage is a message's datagram and its control data (the files).
func EncodeMessage(v any, files []*os.File) (b, oob []byte, err error) {
	if st, ok := v.(Status); ok {
		b = st.AppendJSON(nil) // as init reports, without reflection
	} else if b, err = json.Marshal(v); err != nil {
		return nil, nil, err
	}
	if len(b) > MaxMessage {
		return nil, nil, fmt.Errorf("control message of %d bytes is over %d", len(b), MaxMessage)
	}
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	return b, oob, nil
}

// RecvMessage receives one datagram sent with SendMessage into v, and the
// files that came with it (close-on-exec). It returns io.EOF-like errors
// when the peer is gone.
func RecvMessage(sock *os.File, v any) ([]*os.File, error) {
	buf := make([]byte, MaxMessage)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		var files []*os.File
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return nil, fmt.Errorf("control message: %w", err)
			}
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "passed"))
				}
			}
		}
		if n == 0 && oobn == 0 {
			return nil, ErrPeerGone
		}
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			closeFiles(files)
			return nil, fmt.Errorf("control message truncated")
		}
		if err := json.Unmarshal(buf[:n], v); err != nil {
			closeFiles(files)
			return nil, fmt.Errorf("control message: %w", err)
		}
		return files, nil
	}
}

// ErrPeerGone is returned by RecvMessage when the other end has closed.
var ErrPeerGone = errors.New("control socket closed")

func closeFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// SendFD passes f over the unix socket sock.
func SendFD(sock, f *os.File) error { return SendFDTag(sock, f, 0) }

// SendFDTag passes f with a one-byte tag saying what it is.
func SendFDTag(sock, f *os.File, tag byte) error {
	return unix.Sendmsg(int(sock.Fd()), []byte{tag}, unix.UnixRights(int(f.Fd())), nil, 0)
}

// RecvFD receives one descriptor passed with SendFD.
func RecvFD(sock *os.File) (*os.File, error) {
	f, _, err := RecvFDTag(sock)
	return f, err
}

// RecvFDTag receives one descriptor and its tag.
func RecvFDTag(sock *os.File) (*os.File, byte, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, 0, err
	}
	if n == 0 && oobn == 0 {
		return nil, 0, io.EOF
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, 0, fmt.Errorf("no descriptor received")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, 0, fmt.Errorf("no descriptor received")
	}
	return os.NewFile(uintptr(fds[0]), "passed"), buf[0], nil
}
