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

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/client"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// A client with no token fills every connection slot with requests that
// announce a body and never send it: the server answers 401 at once, but
// net/http then drains the unread body (up to 256 KiB) under the read
// deadline bound() set (body_timeout), keeping the connection "active"
// and so never evictable. Legitimate clients are refused with 503 for a
// whole body_timeout, and the attacker repeats.
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
	}
	waitFor(t, "four connections", func() bool { return f.srv.conns.count() == 4 })
	time.Sleep(200 * time.Millisecond) // their handlers answered 401
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
// idempotency key: the key is kept (markStarted ran before the command)
// with status 0 and a null body. Sent again, the "kept answer" is
// WriteHeader(0): net/http panics and the client gets no answer at all,
// for 24 hours, under that key.
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

// While the database is down, every record the audit log writes is queued
// for the index, and put back after each failed attempt, without bound:
// an attacker (even one with no token, within rate_limit.record, or an
// agent's token) grows the server's memory for as long as the database
// stays down. The log's file already holds every record (and recovery
// re-indexes the tail from it), so the queue need not.
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

// A denied step is not "left refused" (docs/SERVER.md, Sessions): sent
// again, the very same request files a fresh approval request and is
// held again, so the agent can re-ask the reviewers for a step they
// denied as often as its rate limit allows.
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

// A held session files one approval request per distinct step, without
// bound: an agent floods the reviewers' queue (and the journal, which
// every held step reads whole) with requests that differ in one byte of
// stdin, to bury one among them.
func TestAttack_HeldSessionFloodsApprovals(t *testing.T) {
	f, sb := heldFixture(t, "")
	ctx := context.Background()
	a, admin := f.client("alice-a"), f.client("ops")
	const n = 120
	for i := range n {
		if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"sh"}, Stdin: []byte(fmt.Sprintf("echo %d", i))}); !client.IsStatus(err, 423) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	pending, err := admin.Approvals(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) > 100 {
		t.Fatalf("one sandbox's session has %d approval requests pending at once", len(pending))
	}
}

// Trajectory rules are evaluated when a step ends (session.step, called
// from finish), while begin lets a step start whenever the session is
// not stopped yet: an agent that sends its steps at once gets every one
// of them past a rule that holds the session from step 2 on, none held
// for a person. Here 6 commands run where the rule lets 2 run unapproved.
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


// Recovery takes every "start" without an "end" in the log's tail for a
// sandbox this node left, but the log's file is shared with other writers
// (cordon run, cordon mcp: "records other processes append to the same
// file are in the file only"). A cordon run still running on the same log
// when the server starts gets an "end node_restarted" record written in
// its name, and a session of this node in the database: the audit trail
// says a sandbox ended that runs on, and its later records follow its end.
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
