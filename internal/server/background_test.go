package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// blockBox runs "block" until its context ends (signaled), anything else
// as fakeBox does.
type blockBox struct{ *fakeBox }

func (b *blockBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	if len(e.Args) > 0 && e.Args[0] == "block" {
		fmt.Fprintln(e.Stdout, "blocking")
		select {
		case <-ctx.Done():
		case <-b.done: // the sandbox ended
			return outcome.Outcome{}, sandbox.ErrEnded
		}
		code := 137
		return outcome.Outcome{Status: outcome.Signaled, ExitCode: code, Signal: "SIGKILL", Message: "killed"}, nil
	}
	return b.fakeBox.Exec(ctx, e)
}

// A background command is answered at once, runs on after its request,
// holds a command slot while it runs, is listed, waited for with its
// output and outcome, and killed; its output is kept after it ended.
func TestBackgroundCommands(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			return &blockBox{&fakeBox{id: id, done: make(chan struct{})}}, nil
		}
	})
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) api.Command {
		t.Helper()
		status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: args, Background: true})
		var c api.Command
		if status != http.StatusAccepted || json.Unmarshal(body, &c) != nil || c.ID == "" || c.State != "running" {
			t.Fatalf("starting %v: %d %s", args, status, body)
		}
		return c
	}
	quick := start("echo", "hi")
	blocked := start("block")
	if status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"x"}, Background: true, Stream: true}); status != http.StatusBadRequest {
		t.Errorf("background and stream: %d %s", status, body)
	}

	status, body := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands/"+quick.ID+"?wait=1", nil)
	var res api.ExecResult
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || string(res.Stdout) != sb.ID+" ran echo hi\n" || res.Outcome.Status != outcome.OK {
		t.Fatalf("waiting for the quick one: %d %s", status, body)
	}
	// Running: described, not waited for.
	status, body = f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands/"+blocked.ID, nil)
	var c api.Command
	if status != http.StatusOK || json.Unmarshal(body, &c) != nil || c.State != "running" || c.Outcome != nil {
		t.Fatalf("the blocked one: %d %s", status, body)
	}
	status, body = f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands", nil)
	var list []api.Command
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 2 || list[0].ID != quick.ID || list[0].State != "ended" || list[1].State != "running" {
		t.Fatalf("the list: %d %s", status, body)
	}
	// Another agent's token sees none of it.
	if status, _ := f.call(t, "bob-b", "GET", "/v1/sandboxes/"+sb.ID+"/commands/"+blocked.ID, nil); status != http.StatusNotFound {
		t.Errorf("another agent: %d", status)
	}
	status, body = f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/commands/"+blocked.ID+"/kill", nil)
	if status != http.StatusOK || json.Unmarshal(body, &c) != nil || c.State != "ended" || c.Outcome == nil || c.Outcome.Status != outcome.Signaled {
		t.Fatalf("the kill: %d %s", status, body)
	}
	status, body = f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands/"+blocked.ID, nil)
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || string(res.Stdout) != "blocking\n" || res.Outcome.Status != outcome.Signaled {
		t.Fatalf("the killed one's output: %d %s", status, body)
	}
	if status, _ := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands/cmd-none", nil); status != http.StatusNotFound {
		t.Errorf("no such command: %d", status)
	}

	// At most maxBackground run at once in a sandbox (each holds a slot).
	var ids []string
	for i := 0; i < maxBackground; i++ {
		status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"block"}, Background: true})
		if status == http.StatusTooManyRequests {
			break // the agent's command slots end it first
		}
		var c api.Command
		if status != http.StatusAccepted || json.Unmarshal(body, &c) != nil {
			t.Fatalf("background %d: %d %s", i, status, body)
		}
		ids = append(ids, c.ID)
	}
	if status, _ := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"block"}, Background: true}); status != http.StatusTooManyRequests {
		t.Errorf("one more background command: %d", status)
	}
	// The sandbox's end ends them.
	if _, err := a.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the background commands to end with their sandbox", func() bool {
		status, body := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands", nil)
		var list []api.Command
		if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
			return false
		}
		for _, c := range list {
			if c.State != "ended" {
				return false
			}
		}
		return true
	})
}
