package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// Bounds of a terminal: one message from the client, the size of the
// terminal, the arguments of its command.
const (
	terminalMaxMessage = 64 << 10
	terminalMaxSide    = 1000
	terminalMaxArgs    = 256
)

// defaultShell is the command of a terminal that names none.
const defaultShell = "/bin/sh"

// terminalSignals are the signals a terminal's client may send.
var terminalSignals = map[string]syscall.Signal{
	"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTSTP": syscall.SIGTSTP, "SIGCONT": syscall.SIGCONT,
}

// terminalOptions reads a terminal request: arg (repeated; default
// /bin/sh), dir, rows and cols (default 24x80), timeout.
func terminalOptions(r *http.Request) (sandbox.ExecOptions, error) {
	q := r.URL.Query()
	args := q["arg"]
	if len(args) == 0 {
		args = []string{defaultShell}
	}
	if len(args) > terminalMaxArgs {
		return sandbox.ExecOptions{}, fmt.Errorf("arg: at most %d arguments", terminalMaxArgs)
	}
	dir := q.Get("dir")
	if dir != "" && !path.IsAbs(dir) {
		return sandbox.ExecOptions{}, fmt.Errorf("dir: want an absolute path inside the sandbox, found %q", dir)
	}
	timeout, err := parseTimeout(q.Get("timeout"))
	if err != nil {
		return sandbox.ExecOptions{}, err
	}
	side := func(name string, def uint16) (uint16, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > terminalMaxSide {
			return 0, fmt.Errorf("%s: want 1 to %d, found %q", name, terminalMaxSide, v)
		}
		return uint16(n), nil
	}
	t := &sandbox.Terminal{}
	if t.Rows, err = side("rows", 24); err != nil {
		return sandbox.ExecOptions{}, err
	}
	if t.Cols, err = side("cols", 80); err != nil {
		return sandbox.ExecOptions{}, err
	}
	return sandbox.ExecOptions{Args: args, Dir: dir, Timeout: timeout, Terminal: t}, nil
}

// terminalControl reads one text message of the client: input, or a
// change to the terminal, which it sends on resize or sigs (until ctx
// ends).
func terminalControl(ctx context.Context, b []byte, input io.Writer, resize chan<- sandbox.Winsize, sigs chan<- syscall.Signal) error {
	var m api.TerminalMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		return fmt.Errorf("not a terminal message: %.100q", b)
	}
	switch m.Type {
	case "input":
		_, err := input.Write(m.Data)
		return err
	case "resize":
		if m.Rows < 1 || m.Cols < 1 || m.Rows > terminalMaxSide || m.Cols > terminalMaxSide {
			return fmt.Errorf("resize: want rows and cols from 1 to %d, found %dx%d", terminalMaxSide, m.Rows, m.Cols)
		}
		select {
		case resize <- sandbox.Winsize{Rows: m.Rows, Cols: m.Cols}:
		case <-ctx.Done():
		}
	case "signal":
		sig, ok := terminalSignals[m.Signal]
		if !ok {
			return fmt.Errorf("signal: %q is not one a terminal sends", m.Signal)
		}
		select {
		case sigs <- sig:
		case <-ctx.Done():
		}
	default:
		return fmt.Errorf("type: %q is not input, resize or signal", m.Type)
	}
	return nil
}

func (s *Server) terminal(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.live(w, r, c)
	if e == nil {
		return status
	}
	release, status := s.slot(w, e.agent.Name, e.id)
	if release == nil {
		return status
	}
	defer release()
	cmd, err := terminalOptions(r)
	if err == nil {
		err = checkTimeout(cmd.Timeout, e.profile)
	}
	if err == nil {
		if env := withCreateEnv(e, envMap(cmd.Env)); len(env) > 0 {
			cmd.Env = envList(env)
		}
	}
	if err != nil {
		return fail(w, http.StatusBadRequest, "%v", err)
	}
	what := func() (any, error) {
		return map[string]any{"args": cmd.Args, "dir": cmd.Dir, "env": envMap(cmd.Env), "terminal": true}, nil
	}
	if err := s.begin(e, c, "exec", what); err != nil {
		return failStep(w, err)
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		// Accept has answered (400 or 403).
		s.finish(e, "exec", "", nil, true)
		return http.StatusBadRequest
	}
	defer ws.CloseNow()
	ws.SetReadLimit(terminalMaxMessage)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	resize, sigs := make(chan sandbox.Winsize, 1), make(chan syscall.Signal, 1)
	cmd.Terminal.Resize, cmd.Terminal.Signal = resize, sigs
	inR, inW := io.Pipe()
	defer inR.Close() // what the client still sends goes nowhere
	cmd.Stdin = inR
	closed := make(chan error, 1) // why the client's side ended
	go func() {
		defer inW.Close()
		for {
			typ, b, err := ws.Read(ctx)
			if err == nil && typ == websocket.MessageBinary {
				_, err = inW.Write(b)
			} else if err == nil {
				if err = terminalControl(ctx, b, inW, resize, sigs); err != nil {
					closed <- err
				}
			}
			if err != nil {
				// The client went away, or broke the protocol: the
				// command ends.
				cancel()
				return
			}
		}
	}()
	out := writerFunc(func(p []byte) (int, error) {
		if err := ws.Write(ctx, websocket.MessageBinary, p); err != nil {
			return 0, err
		}
		return len(p), nil
	})
	o, err := s.runCommand(ctx, e, c, cmd, out, io.Discard)
	last := api.TerminalMessage{Type: "exit", Outcome: &o}
	select {
	case perr := <-closed:
		last = api.TerminalMessage{Type: "error", Error: perr.Error()}
	default:
		if err != nil {
			last = api.TerminalMessage{Type: "error", Error: execError(e, err)}
		}
	}
	if b, jerr := json.Marshal(last); jerr == nil {
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
		ws.Write(wctx, websocket.MessageText, b)
		wcancel()
	}
	code := websocket.StatusNormalClosure
	if last.Type == "error" {
		code = websocket.StatusPolicyViolation
	}
	ws.Close(code, "")
	return http.StatusSwitchingProtocols
}
