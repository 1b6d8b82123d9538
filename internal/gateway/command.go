package gateway

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// ResultCap is the largest message the gateway reads from a tool server:
// the profile's bound of a result (session.max_result_bytes) and room for
// the rest of the message.
func ResultCap(p *profile.Profile) int64 { return p.ResultCap() + envelopeBytes }

// Oversized is a message of a tool server that was too large to read: its
// size and SHA-256, and the id of the request it answered.
type Oversized struct {
	Bytes  int64
	SHA256 string
	ID     json.RawMessage
}

// CommandTransport runs the tool server cmd and talks to it over its
// stdin and stdout, as the MCP SDK's CommandTransport does, except that
// each message it sends is bounded at limit bytes (ResultCap): a larger
// one is read to its end without being kept, and the call it answers gets
// a JSON-RPC error saying it was too large, while the connection goes on.
// A result past the bound is not taken for a server that broke (the
// SDK's own reader ends the connection on a line past its bound, which
// the gateway counts as a crash). refused, when not nil, is told of each.
func CommandTransport(cmd *exec.Cmd, limit int64, refused func(Oversized)) mcp.Transport {
	return &commandTransport{cmd: cmd, limit: limit, refused: refused}
}

type commandTransport struct {
	cmd     *exec.Cmd
	limit   int64
	refused func(Oversized)
}

// stopWait is how long Close waits for the server to exit once its input
// is closed, and again after SIGTERM, before it kills it.
const stopWait = 5 * time.Second

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		err := boundLines(stdout, pw, t.limit, func(over *oversized) error {
			id := over.id.value()
			if id == nil {
				// No call to answer: nothing is passed on.
				return nil
			}
			if t.refused != nil {
				t.refused(Oversized{Bytes: over.n, SHA256: hex.EncodeToString(over.h.Sum(nil)), ID: id})
			}
			msg := fmt.Sprintf("the tool server's answer is %d bytes, more than the bound of %d bytes (session.max_result_bytes of the profile, and %d bytes for the rest of the message): cordon did not read it", over.n, t.limit, envelopeBytes)
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": msg}})
			_, err := pw.Write(append(b, '\n'))
			return err
		})
		pw.CloseWithError(err)
	}()
	tr := &mcp.IOTransport{Reader: pr, Writer: &commandInput{cmd: t.cmd, stdin: stdin}, MaxLineLength: int(t.limit) + 1}
	return tr.Connect(ctx)
}

// commandInput is the server's stdin; closing it ends the server: its
// input is closed, and it is waited for, then sent SIGTERM, then killed.
type commandInput struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func (c *commandInput) Write(b []byte) (int, error) { return c.stdin.Write(b) }

func (c *commandInput) Close() error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-done:
			return err, true
		case <-time.After(stopWait):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return exited(err)
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return exited(err)
		}
	}
	c.cmd.Process.Kill()
	if err, ok := wait(); ok {
		return exited(err)
	}
	return errors.New("the tool server does not exit")
}

// exited is what a server's exit says when the connection is closed: an
// exit by a signal cordon sent is no error.
func exited(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}
