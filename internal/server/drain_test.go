package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// Draining refuses new requests with 503 and Retry-After, lets the
// command running finish and answer whole, and returns once it did.
func TestDrainLetsRunningCommandsFinish(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, 0, nil, func(args []string) outcome.Outcome {
		if args[0] == "wait" {
			<-release
		}
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}
	})
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res api.ExecResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"wait"}})
		ran <- result{res, err}
	}()
	waitFor(t, "the command to run", func() bool {
		got, _ := a.Get(ctx, sb.ID)
		return got.Running == 1
	})
	drained := make(chan error, 1)
	go func() { drained <- f.srv.Drain(ctx) }()
	waitFor(t, "draining", func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return f.srv.draining
	})
	req, _ := http.NewRequest("POST", f.url+api.Version+"/sandboxes", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+f.tokens["alice-a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a create while draining: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := f.client("ops").Health(ctx); !client.IsStatus(err, 503) {
		t.Fatalf("health while draining: %v", err)
	}
	select {
	case err := <-drained:
		t.Fatalf("drained while a command runs: %v", err)
	default:
	}
	close(release)
	r := <-ran
	if r.err != nil || r.res.Outcome.Status != outcome.OK || !strings.Contains(string(r.res.Stdout), "ran wait") {
		t.Fatalf("the command running while draining: %+v %v", r.res, r.err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

// A drain cut short says how many requests were still running.
func TestDrainCutShort(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	f := newFixture(t, 0, nil, func(args []string) outcome.Outcome {
		<-release
		return outcome.Outcome{Status: outcome.OK}
	})
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"wait"}})
	waitFor(t, "the command to run", func() bool {
		got, _ := a.Get(ctx, sb.ID)
		return got.Running == 1
	})
	cut, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.srv.Drain(cut); err == nil || !strings.Contains(err.Error(), "1 requests still running") {
		t.Fatalf("a drain cut short: %v", err)
	}
}
