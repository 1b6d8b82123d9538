package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// spewBox: "spew" writes 200 KiB to each stream and ends; "block" blocks.
type spewBox struct{ *blockBox }

func (b *spewBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	if len(e.Args) > 0 && e.Args[0] == "spew" {
		chunk := bytes.Repeat([]byte("x"), 200<<10)
		e.Stdout.Write(chunk)
		e.Stderr.Write(chunk)
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}, nil
	}
	return b.blockBox.Exec(ctx, e)
}

func bgAttackFixture(t *testing.T, p *profile.Profile, tweak func(*Options)) (*fixture, *[]*fakeBox) {
	var boxes []*fakeBox
	f := newFixtureWith(t, 0, p, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			fb := &fakeBox{id: id, done: make(chan struct{})}
			boxes = append(boxes, fb)
			return &spewBox{&blockBox{fb}}, nil
		}
		if tweak != nil {
			tweak(o)
		}
	})
	// Runs before the fixture's cleanup (srv.Close, which would hang on
	// a running background command: see TestAttack_BackgroundEndsWithTheServer).
	t.Cleanup(func() {
		for _, b := range boxes {
			b.Close()
		}
	})
	return f, &boxes
}

func bgAttackCall(t *testing.T, f *fixture, ctx context.Context, name, method, path string, body any, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var in *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = bytes.NewReader(b)
	} else {
		in = bytes.NewReader(nil)
	}
	req, _ := http.NewRequestWithContext(ctx, method, f.url+path, in)
	req.Header.Set("Authorization", "Bearer "+f.tokens[name])
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), resp.Header
}

// Server.Close waits on s.wg before it ends the sandboxes; a
// background command holds s.wg until it ends, which only the sandbox's
// end (or a kill) does: Close never returns.
func TestAttack_BackgroundEndsWithTheServer(t *testing.T) {
	f, boxes := bgAttackFixture(t, nil, nil)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"block"}, Background: true})
	if status != http.StatusAccepted {
		t.Fatalf("%d %s", status, body)
	}
	closed := make(chan struct{})
	go func() { f.srv.Close(); close(closed) }()
	select {
	case <-closed:
		return
	case <-time.After(3 * time.Second):
	}
	// Unblock it, so that the test's cleanup can end.
	(*boxes)[0].Close()
	<-closed
	t.Fatalf("Server.Close did not return in 3 s with a background command running (returned once the box was closed by hand)")
}

// The idempotency key of a background start is released, not kept:
// markStarted runs in the command's goroutine, after k.done already
// looked at started. The same request with the same key starts a second
// command.
func TestAttack_BackgroundKeyStartsOnce(t *testing.T) {
	f, _ := bgAttackFixture(t, nil, nil)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	req := api.ExecRequest{Args: []string{"block"}, Background: true}
	hdr := map[string]string{KeyHeader: "k-1"}
	var ids []string
	for i := 0; i < 2; i++ {
		status, body, h := bgAttackCall(t, f, context.Background(), "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", req, hdr)
		var c api.Command
		json.Unmarshal(body, &c)
		t.Logf("try %d: %d replayed=%q id=%s", i, status, h.Get("Idempotent-Replayed"), c.ID)
		ids = append(ids, c.ID)
	}
	status, body := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands", nil)
	var list []api.Command
	json.Unmarshal(body, &list)
	if status != 200 || len(list) != 1 {
		t.Fatalf("one request sent twice under one idempotency key started %d background commands (%v)", len(list), ids)
	}
}

// Kept output outlives the command slots and the sandbox: each ended
// background command keeps its spool files (open descriptors, disk) and
// up to 128 KiB in memory; 64 per sandbox, ended sandboxes kept 10 min.
// The spool was bounded by per_server running commands before.
func TestAttack_BackgroundKeptOutputBounded(t *testing.T) {
	f, _ := bgAttackFixture(t, nil, nil)
	a := f.client("alice-a")
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		sb, err := a.Create(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < keepBackground; i++ {
			status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"spew"}, Background: true})
			if status != http.StatusAccepted {
				t.Fatalf("%d %s", status, body)
			}
			var c api.Command
			json.Unmarshal(body, &c)
			// Wait for it (without reading the output: ?wait=1 would send it).
			waitFor(t, "spew to end", func() bool {
				_, body := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/commands", nil)
				var list []api.Command
				json.Unmarshal(body, &list)
				for _, x := range list {
					if x.ID == c.ID {
						return x.State == "ended"
					}
				}
				return false
			})
		}
		if _, err := a.Kill(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	open := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, f.srv.spoolDir) {
			open++
		}
	}
	lim := f.srv.cmdLimits
	t.Logf("open spool files: %d (per_server %d commands; 2 streams each: %d)", open, lim.PerServer, 2*lim.PerServer)
	if open > 2*lim.PerServer {
		t.Fatalf("%d spool files kept open by one agent after its sandboxes ended, above the %d that per_server running commands could hold", open, 2*lim.PerServer)
	}
}

// Where the trajectory rules take one step at a time, a background
// command (which would hold the session's turn for its whole life, every
// later step waiting) is refused, and holds no slot.
func TestAttack_BackgroundRefusedWhereStepsTakeTurns(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntrajectory:\n  rules:\n    - name: many\n      when: 'session.steps >= 1000'\n      action: approve\n"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := bgAttackFixture(t, p, func(o *Options) { o.Approvals = store })
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"block"}, Background: true})
	if status != http.StatusConflict {
		t.Fatalf("a background command where steps take turns: %d %s", status, body)
	}
	f.srv.slots.mu.Lock()
	held := f.srv.slots.sandbox[sb.ID]
	f.srv.slots.mu.Unlock()
	if held != 0 {
		t.Errorf("the refused command holds %d command slots", held)
	}
	if status, body := f.call(t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"echo", "hi"}}); status != http.StatusOK {
		t.Errorf("a step after it: %d %s", status, body)
	}
}

// maxBackground is counted, then the lock let go, then the command
// appended: starts side by side all pass the count (visible when
// commands.per_sandbox is above 16).
func TestAttack_BackgroundMaxUnderRace(t *testing.T) {
	f, _ := bgAttackFixture(t, nil, func(o *Options) {
		o.Config.Commands.PerSandbox, o.Config.Commands.PerAgent = 64, 64
	})
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	const n = 48
	done := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			status, _, _ := bgAttackCall(t, f, context.Background(), "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"block"}, Background: true}, nil)
			done <- status
		}()
	}
	accepted := 0
	for i := 0; i < n; i++ {
		if <-done == http.StatusAccepted {
			accepted++
		}
	}
	if accepted > maxBackground {
		t.Fatalf("%d background commands run at once in one sandbox, above maxBackground %d", accepted, maxBackground)
	}
}

// One agent's flood of background commands drops its own kept output,
// never that of an agent within its share of the server's bound.
func TestAttack_BackgroundKeptOutputFairShare(t *testing.T) {
	f, _ := bgAttackFixture(t, nil, func(o *Options) {
		o.Config.Commands.PerSandbox, o.Config.Commands.PerAgent, o.Config.Commands.PerServer = 2, 2, 4
	})
	ctx := context.Background()
	run := func(token string) (string, string) {
		t.Helper()
		sb, err := f.client(token).Create(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		status, body := f.call(t, token, "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Args: []string{"echo", "kept"}, Background: true})
		var c api.Command
		if status != http.StatusAccepted || json.Unmarshal(body, &c) != nil {
			t.Fatalf("%s: %d %s", token, status, body)
		}
		if status, body := f.call(t, token, "GET", "/v1/sandboxes/"+sb.ID+"/commands/"+c.ID+"?wait=1", nil); status != http.StatusOK {
			t.Fatalf("%s: waiting: %d %s", token, status, body)
		}
		return sb.ID, c.ID
	}
	bobSB, bobCmd := run("bob-b")
	var alice [][2]string
	for i := 0; i < 6; i++ {
		sb, cmd := run("alice-a")
		alice = append(alice, [2]string{sb, cmd})
		if _, err := f.client("alice-a").Kill(ctx, sb); err != nil { // within max_sandboxes
			t.Fatal(err)
		}
	}
	if status, body := f.call(t, "bob-b", "GET", "/v1/sandboxes/"+bobSB+"/commands/"+bobCmd, nil); status != http.StatusOK {
		t.Errorf("bob's kept output, after alice's flood: %d %s", status, body)
	}
	if status, _ := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+alice[0][0]+"/commands/"+alice[0][1], nil); status != http.StatusNotFound {
		t.Errorf("alice's oldest kept output, past the bound: %d", status)
	}
	if status, _ := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+alice[5][0]+"/commands/"+alice[5][1], nil); status != http.StatusOK {
		t.Errorf("alice's newest kept output: %d", status)
	}
}
