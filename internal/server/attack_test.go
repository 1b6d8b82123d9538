package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// A client with no token that fills every connection slot with requests
// that announce a body and never send it does not lock others out: each
// is answered 401 at once and its connection ends, without waiting for
// the body (net/http would read what is left of it, up to 256 KiB, under
// body_timeout, the connection busy and never evicted meanwhile).
func TestAttack_UnauthSlowBodyPinsConnections(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.HTTP.MaxConnections, o.Config.HTTP.MaxConnectionsPerRemote = 4, 2
		o.Config.HTTP.BodyTimeout = "30s"
	})
	addr := realServer(t, f)
	for _, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"} {
		c, err := dialFrom(ip, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// No token, a body announced and never sent.
		fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.Contains(line, "401") {
			t.Fatalf("a request without a token: %q", line)
		}
	}
	// Answered, their connections end: none holds a slot.
	waitFor(t, "the refused connections to end", func() bool { return f.srv.conns.count() == 0 })
	c, err := dialFrom("127.0.0.4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if strings.TrimSpace(line) != "HTTP/1.1 200 OK" {
		t.Fatalf("a legitimate client, while 4 tokenless requests that were already answered 401 hold their connections: %q", line)
	}
}

// errBox is a sandbox whose commands cannot be run.
type errBox struct{ fakeBox }

func (b *errBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	return outcome.Outcome{}, errors.New("the sandbox failed")
}

// A create whose first command could not be run, sent under an
// idempotency key, keeps that answer under the key (not an empty status,
// which net/http would refuse to write): sent again, the same answer.
func TestAttack_IdempotentCreateFailedFirstCommandKeepsStatusZero(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			return &errBox{fakeBox{id: id, done: make(chan struct{})}}, nil
		}
	})
	body := `{"exec":{"args":["true"]}}`
	status, got, _ := f.keyed(t, "alice-a", "POST", api.Version+"/sandboxes", "k-create", body)
	if status != 409 {
		t.Fatalf("the first create: %d %s", status, got)
	}
	req, _ := http.NewRequest("POST", f.url+api.Version+"/sandboxes", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.tokens["alice-a"])
	req.Header.Set(KeyHeader, "k-create")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the same create sent again under its key gets no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 {
		t.Fatalf("sent again: status %d", resp.StatusCode)
	}
}

// While the database is down, the records waiting for the index are
// bounded in memory: past the bound they are dropped from the queue, and
// the index catches up from the log's file, which holds every record.
func TestAttack_IndexQueueUnboundedWhileDatabaseDown(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	f.srv.opts.DB.Close()
	const n = 30000
	for i := range n {
		f.srv.record("", caller{}, audit.Decision, "api_request", map[string]any{"path": "/v1/x", "i": i})
		if i%1000 == 999 {
			f.srv.recordNow()
			f.srv.index()
		}
	}
	f.srv.recordNow()
	f.srv.index()
	f.srv.pending.mu.Lock()
	queued := len(f.srv.pending.recs)
	f.srv.pending.mu.Unlock()
	if queued > maxKeys {
		t.Fatalf("%d records queued in memory for a database that is down (no bound)", queued)
	}
}

var _ = net.Dial

// A denied step is left refused (docs/SERVER.md, Sessions): sent again,
// the very same request files no fresh approval request.
func TestAttack_DeniedStepIsFiledAgain(t *testing.T) {
	f, sb := heldFixture(t, "")
	ctx := context.Background()
	a, admin := f.client("alice-a"), f.client("ops")
	bad := api.ExecRequest{Args: []string{"rm", "-rf", "/workspace"}}
	if _, err := a.Run(ctx, sb.ID, bad); !client.IsStatus(err, 423) {
		t.Fatalf("the held command: %v", err)
	}
	pending, err := admin.Approvals(ctx, false)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	if _, err := admin.Decide(ctx, pending[0].ID, false, api.Decision{Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(ctx, sb.ID, bad)
	again, _ := admin.Approvals(ctx, false)
	if client.IsStatus(err, 423) || len(again) != 0 {
		t.Fatalf("the denied command, sent again: %v; %d new approval requests pending", err, len(again))
	}
}

// A held session has a bounded number of approval requests pending: an
// agent cannot flood the reviewers' queue with requests that differ in
// one byte of stdin, to bury one among them.
func TestAttack_HeldSessionFloodsApprovals(t *testing.T) {
	f, sb := heldFixture(t, "")
	ctx := context.Background()
	a, admin := f.client("alice-a"), f.client("ops")
	const n = 120
	for i := range n {
		if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"sh"}, Stdin: []byte(fmt.Sprintf("echo %d", i))}); !client.IsStatus(err, 423) && !client.IsStatus(err, 409) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	pending, err := admin.Approvals(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) > maxPendingSteps {
		t.Fatalf("one sandbox's session has %d approval requests pending at once", len(pending))
	}
}

// Trajectory rules are evaluated when a step ends: an agent that sends its
// steps at once does not get them past a rule that holds the session from
// step 2 on, since such a session runs one step at a time. Of 6 commands
// sent together, 2 run unapproved.
func TestAttack_ConcurrentStepsEvadeTrajectoryHold(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntrajectory:\n  rules:\n    - name: many\n      when: 'session.steps >= 2'\n      action: approve\n"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	var ran atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	f := newFixtureWith(t, 0, p, func(args []string) outcome.Outcome {
		if ran.Add(1) == n {
			once.Do(func() { close(all) })
		}
		select { // every command waits for the others, a bounded time
		case <-all:
		case <-time.After(2 * time.Second):
		}
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}
	}, nil, func(o *Options) { o.Approvals = store })
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"step", fmt.Sprint(i)}})
		}()
	}
	wg.Wait()
	if got := ran.Load(); got > 2 {
		t.Fatalf("%d commands ran unapproved in a session that a rule holds from its 2nd step on", got)
	}
}

// Recovery ends only the sandboxes this node started: the log's file is
// shared with other writers (cordon run, cordon mcp), and a cordon run
// still running on the same log when the server starts is not ended in
// its name.
func TestAttack_RecoveryEndsAnotherWritersSandbox(t *testing.T) {
	var logPath string
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Node = "n1"
		logPath = o.Audit.Path()
		// Another process (cordon run) on the same log, still running.
		other, err := audit.Open(logPath, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Append(audit.Event{Sandbox: "run-7f3a", Agent: "a", Kind: audit.Decision, Type: "start"},
			audit.Event{Sandbox: "run-7f3a", Agent: "a", Kind: audit.Action, Type: "exec"}); err != nil {
			t.Fatal(err)
		}
	})
	f.srv.opts.Audit.Flush()
	var ended []string
	audit.ReadAfter(logPath, 0, "", func(r audit.Record) error {
		if r.Type == "end" {
			ended = append(ended, r.Sandbox)
		}
		return nil
	})
	if len(ended) != 0 {
		t.Fatalf("the server's start recorded the end of sandboxes it never ran: %v", ended)
	}
}
