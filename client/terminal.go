package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// TerminalOptions describe an interactive command: Args (default the
// server's shell, /bin/sh), its directory, the terminal's size (default
// 24x80) and a timeout ("30s").
type TerminalOptions struct {
	Args       []string
	Dir        string
	Rows, Cols int
	Timeout    string
}

// Terminal is a command running on a pseudo-terminal in a sandbox, over a
// WebSocket: Write sends it input, Wait copies its output until it ends.
type Terminal struct {
	ws  *websocket.Conn
	ctx context.Context
}

// Terminal starts an interactive command in a sandbox.
func (c *Client) Terminal(ctx context.Context, id string, o TerminalOptions) (*Terminal, error) {
	q := url.Values{}
	for _, a := range o.Args {
		q.Add("arg", a)
	}
	if o.Dir != "" {
		q.Set("dir", o.Dir)
	}
	if o.Rows > 0 {
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	if o.Cols > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
	}
	if o.Timeout != "" {
		q.Set("timeout", o.Timeout)
	}
	u := "ws" + strings.TrimPrefix(c.base, "http") + sandboxPath(id, "/terminal?"+q.Encode())
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.HTTP, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			var e api.Error
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				e.Error = strings.TrimSpace(string(b))
			}
			return nil, answerError(resp.StatusCode, e.Error, e.Sandbox, e.Approval, 0)
		}
		return nil, fmt.Errorf("cordon serve: opening a terminal: %w", err)
	}
	ws.SetReadLimit(1 << 20)
	return &Terminal{ws: ws, ctx: ctx}, nil
}

// Write sends input to the terminal.
func (t *Terminal) Write(p []byte) (int, error) {
	if err := t.ws.Write(t.ctx, websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (t *Terminal) control(m api.TerminalMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.ws.Write(t.ctx, websocket.MessageText, b)
}

// Resize changes the terminal's size.
func (t *Terminal) Resize(rows, cols int) error {
	return t.control(api.TerminalMessage{Type: "resize", Rows: uint16(rows), Cols: uint16(cols)})
}

// Signal sends a signal ("SIGINT", "SIGTERM", ...) to the command's
// process group.
func (t *Terminal) Signal(name string) error {
	return t.control(api.TerminalMessage{Type: "signal", Signal: name})
}

// Wait copies the terminal's output to w until the command ends, and
// returns its outcome.
func (t *Terminal) Wait(w io.Writer) (outcome.Outcome, error) {
	defer t.ws.CloseNow()
	for {
		typ, b, err := t.ws.Read(t.ctx)
		if err != nil {
			return outcome.Outcome{}, fmt.Errorf("cordon serve: the terminal ended without an outcome: %w", err)
		}
		if typ == websocket.MessageBinary {
			if w != nil {
				w.Write(b)
			}
			continue
		}
		var m api.TerminalMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return outcome.Outcome{}, fmt.Errorf("cordon serve: reading the terminal: %w", err)
		}
		switch {
		case m.Type == "exit" && m.Outcome != nil:
			return *m.Outcome, nil
		case m.Type == "error":
			return outcome.Outcome{}, answerError(http.StatusConflict, m.Error, "", "", 0)
		}
	}
}

// Close ends the terminal (and so its command).
func (t *Terminal) Close() error { return t.ws.CloseNow() }
