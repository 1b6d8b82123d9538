package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// TestServeDrain stops cordon serve with SIGTERM while a command runs:
// the command finishes and its answer arrives whole, then the sandboxes
// end and the server exits cleanly, leaving nothing behind.
func TestServeDrain(t *testing.T) {
	s := startServeWith(t, "  builder:\n    profile: builder.yaml\n", map[string]string{
		"builder.yaml": testProfile("builder", "  wall: 5m\n"),
	}, "drain_grace: 5m\n", nil)
	ctx := context.Background()
	c := s.client("builder")
	sb, err := c.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(s.dir, "state", "serve", "sandboxes", sb.ID)
	type result struct {
		res api.ExecResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"sh", "-c",
			"echo before; touch started; while [ ! -e go ]; do sleep 0.05; done; echo after"}})
		ran <- result{res, err}
	}()
	waitUntil(t, "the command to start", func() bool { _, err := os.Stat(filepath.Join(ws, "started")); return err == nil })
	kids := children(s.cmd.Process.Pid)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Once it no longer answers, it is draining; the command goes on.
	waitUntil(t, "the server to stop answering", func() bool { _, err := c.Health(ctx); return err != nil })
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-ran
	if r.err != nil || r.res.Outcome.Status != outcome.OK || string(r.res.Stdout) != "before\nafter\n" {
		t.Fatalf("the command running at SIGTERM: %+v %v\n%s", r.res, r.err, s.log)
	}
	s.stop(t)
	if !strings.Contains(s.log.String(), "running commands have 5m0s to finish") {
		t.Errorf("the server's output:\n%s", s.log)
	}
	if left := s.leftovers(kids); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// A second signal ends the drain at once: the command running is ended
// with its sandbox, and the server exits.
func TestServeDrainSecondSignal(t *testing.T) {
	s := startServeWith(t, "  builder:\n    profile: builder.yaml\n", map[string]string{
		"builder.yaml": testProfile("builder", "  wall: 5m\n"),
	}, "drain_grace: 1h\n", nil)
	ctx := context.Background()
	c := s.client("builder")
	sb, err := c.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(s.dir, "state", "serve", "sandboxes", sb.ID)
	ran := make(chan api.ExecResult, 1)
	go func() {
		res, _ := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"sh", "-c", "touch started; while :; do sleep 0.05; done"}})
		ran <- res
	}()
	waitUntil(t, "the command to start", func() bool { _, err := os.Stat(filepath.Join(ws, "started")); return err == nil })
	s.cmd.Process.Signal(syscall.SIGTERM)
	waitUntil(t, "the server to stop answering", func() bool { _, err := c.Health(ctx); return err != nil })
	s.cmd.Process.Signal(syscall.SIGINT)
	if res := <-ran; res.Outcome.Status == outcome.OK {
		t.Fatalf("the command ran on after the second signal: %+v", res)
	}
	s.stop(t)
	if !strings.Contains(s.log.String(), "cordon: stopping now") {
		t.Errorf("the server's output:\n%s", s.log)
	}
}
