package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// brokenBox is a sandbox that cannot run the command "broken".
type brokenBox struct{ *fakeBox }

func (b brokenBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	if e.Args[0] == "broken" {
		return outcome.Outcome{}, errors.New("the sandbox could not start the command")
	}
	return b.fakeBox.Exec(ctx, e)
}

// A create whose first command could not be run answers the step's own
// status, with the sandbox's id, and the sandbox is ended; one that ran
// and failed is a created sandbox with its result.
func TestCreateFirstCommandNotRun(t *testing.T) {
	f := newFixtureWith(t, 0, nil, func(args []string) outcome.Outcome {
		code := 3
		return outcome.Outcome{Status: outcome.ExitNonzero, CommandExitCode: &code}
	}, nil, func(o *Options) {
		start := o.Start
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			b, err := start(a, p, id)
			return brokenBox{b.(*fakeBox)}, err
		}
	})
	ctx := context.Background()
	a := f.client("alice-a")
	created := func(args string) (int, api.Error) {
		resp, body := f.do(t, "POST", "/v1/sandboxes", "Bearer %s", "alice-a", `{"exec":{"args":["`+args+`"]}}`)
		var e api.Error
		json.Unmarshal([]byte(body), &e)
		return resp.StatusCode, e
	}
	// Ran, exit 3: created, with its result.
	sb, err := a.CreateAndRun(ctx, api.ExecRequest{Args: []string{"false"}})
	if err != nil || sb.Result == nil || sb.Result.Outcome.Status != outcome.ExitNonzero || sb.State != "running" {
		t.Fatalf("a first command that failed: %+v %v", sb, err)
	}
	ended := func(id string) {
		t.Helper()
		got, err := a.Get(ctx, id)
		if err != nil || got.State != "ended" || got.Ended != endFirstCommand {
			t.Errorf("the sandbox of a first command not run: %+v %v", got, err)
		}
	}
	// The sandbox failed it: 409, the sandbox named and ended.
	status, e := created("broken")
	if status != http.StatusConflict || e.Sandbox == "" || !strings.Contains(e.Error, "its first command could not be run: the sandbox could not start the command") {
		t.Fatalf("a first command the sandbox could not start: %d %+v", status, e)
	}
	ended(e.Sandbox)
	// It could not be recorded: 500, not run.
	if err := os.Remove(f.log); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.log, 0o700); err != nil {
		t.Fatal(err)
	}
	// The sandbox's start cannot be recorded: no sandbox, nothing run.
	status, e = created("true")
	if status != http.StatusServiceUnavailable || e.Sandbox != "" || !strings.Contains(e.Error, "nothing was done") {
		t.Fatalf("a create that could not be recorded: %d %+v", status, e)
	}
}
