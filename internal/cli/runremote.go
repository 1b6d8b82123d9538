package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// maxRemoteStdin bounds the input `cordon run --server` sends.
const maxRemoteStdin = 32 << 20

// runRemote runs args in a new sandbox of the server at url, its output
// streamed here, and kills the sandbox after. Its input is cordon's, read
// whole first, unless that is a terminal. An interrupt kills the command.
func runRemote(e *env, url string, args []string, stdout, stderr io.Writer) (outcome.Outcome, error) {
	token, _ := e.getenv("CORDON_TOKEN")
	if token == "" {
		return outcome.Outcome{}, errors.New("run --server: set CORDON_TOKEN to the agent's API token")
	}
	req := api.ExecRequest{Args: args}
	if e.stdin != nil && !isTerminalFile(e.stdin) {
		b, err := io.ReadAll(io.LimitReader(e.stdin, maxRemoteStdin+1))
		if err != nil {
			return outcome.Outcome{}, fmt.Errorf("reading stdin: %w", err)
		}
		if len(b) > maxRemoteStdin {
			return outcome.Outcome{}, fmt.Errorf("run --server: stdin is over %d bytes", maxRemoteStdin)
		}
		req.Stdin = b
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := client.New(url, token)
	sb, err := c.Create(ctx, "")
	if err != nil {
		return outcome.Outcome{}, err
	}
	defer func() {
		kill, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Kill(kill, sb.ID)
	}()
	o, err := c.Exec(ctx, sb.ID, req, stdout, stderr)
	if err != nil {
		return o, err
	}
	o.Sandbox = sb.ID
	return o, nil
}

func isTerminalFile(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// reportRemoteChanges says on stderr what became of the changes of a
// command in a server's guarded or reviewed sandbox, when some wait: they
// wait on the server, for an approver.
func reportRemoteChanges(e *env, o outcome.Outcome) {
	c := o.Changes
	if c == nil {
		return
	}
	if c.Error != "" {
		fmt.Fprintf(e.stderr, "cordon: the sandbox's changes: %s\n", termsafe.Line(c.Error))
	}
	if c.Entries > 0 {
		fmt.Fprintf(e.stderr, "cordon: %d change(s) landed; %d wait for review on the server, as change set %s of sandbox %s (GET /v1/sandboxes/%s/changes shows them; an approver applies them)\n",
			c.Landed, c.Entries, termsafe.Line(c.Set), termsafe.Line(o.Sandbox), termsafe.Line(o.Sandbox))
	}
}
