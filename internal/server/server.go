// Package server is cordon serve: sandboxes as a service over an HTTP JSON
// API (docs/openapi.yaml). An agent's token creates sandboxes of that
// agent's profile only, runs commands in them with the same outcomes as
// cordon run, moves files in and out through the sandbox itself, and keeps
// them alive or kills them; an admin's token sees every sandbox, decides
// approvals and reads the audit log, and creates nothing. Sandboxes are
// pre-warmed per agent, claimed once, never reused, and ended by idle and
// absolute timeouts. Every request is recorded in the audit log with the
// identity of its token.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// Sandbox is what the server needs of a kept-alive sandbox
// (sandbox.Box).
type Sandbox interface {
	Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error)
	Close()
	Done() <-chan struct{}
	// Why says what ended the sandbox by itself: a limit, "drift", or "".
	Why() string
}

// Starter builds a sandbox for an agent from profile p. id names it (in the
// audit log, and its private workspace).
type Starter func(a *Agent, p *profile.Profile, id string) (Sandbox, error)

// Options configure a Server.
type Options struct {
	Config *Config
	// Start builds sandboxes; the server's tests give a fake one.
	Start Starter
	// Audit receives every request and every command; required.
	Audit *audit.Log
	// Approvals is the approval store the admin API decides in; nil: the
	// approval endpoints answer 404.
	Approvals *approvals.Store
	// Log receives the server's own messages.
	Log     io.Writer
	Version string
	// Probe runs the escape probes on an agent's profile (in a sandbox
	// built from it, as cordon probe does), records the report where lint
	// and probe --compare find it, and returns how many probes had each
	// status, with the names of those that escaped. With probe_every set,
	// the server runs it for every agent at start, when the agent's
	// profile changes, and every probe_every. nil: never.
	Probe func(ctx context.Context, a *Agent, p *profile.Profile) (ProbeResult, error)
	// DB keeps the audit index and the sessions (Approvals is usually its
	// journal): an SQLite file, or PostgreSQL that several nodes share;
	// required. Node names this node in it.
	DB   *statedb.DB
	Node string
	// Gateway builds the MCP tool gateway of an agent's profile, served
	// to that agent's tokens at /v1/mcp; record takes its audit events.
	// nil: no MCP endpoint.
	Gateway func(ctx context.Context, a *Agent, p *profile.Profile, record func(...audit.Event) error) (http.Handler, func(), error)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Server serves the API.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	metrics *metrics
	// routeList is every pattern handled, for the OpenAPI check.
	routeList []string

	mu           sync.Mutex
	entries      map[string]*entry
	pools        map[string]*pool
	claiming     map[string]int           // claims under way, by agent
	probes       map[string]*probeState   // by agent
	gateways     map[string]*gatewayEntry // by agent
	gatewayCtx   context.Context
	stopGateways context.CancelFunc
	pending      pending
	indexMu      sync.Mutex // one index at a time
	closed       bool
	stop         chan struct{}
	wg           sync.WaitGroup

	forwards map[string]int // forwarded connections open, by sandbox (under mu)
}

// New makes a server and starts filling its pools.
func New(opts Options) (*Server, error) {
	if opts.Config == nil || opts.Start == nil || opts.Audit == nil || opts.DB == nil {
		return nil, errors.New("server: a configuration, a starter, an audit log and a database are required")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, entries: map[string]*entry{}, pools: map[string]*pool{}, claiming: map[string]int{},
		stop: make(chan struct{}), metrics: newMetrics(), pending: pending{changed: map[string]*entry{}}}
	s.gatewayCtx, s.stopGateways = context.WithCancel(context.Background())
	opts.Audit.OnWrite(s.queueIndex)
	for name, a := range opts.Config.Agents {
		p := newPool(s, a)
		s.pools[name] = p
		s.wg.Add(1)
		go p.fill()
	}
	s.wg.Add(1)
	go s.janitor()
	// Records of requests that run nothing (a list, a refusal) are
	// written and synced by the syncer: every audit_sync, or every second.
	every := opts.Config.SyncEvery
	if every == 0 {
		every = time.Second
	}
	s.wg.Add(2)
	go s.syncer(every)
	go s.indexer()
	s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.mux }

// Close ends every sandbox, pooled or claimed, and stops the pools.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	s.stopGateways()
	entries := make([]*entry, 0, len(s.entries))
	for _, e := range s.entries {
		entries = append(entries, e)
	}
	s.mu.Unlock()
	s.wg.Wait()
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.end(e, "server_stopped")
		}()
	}
	for _, p := range s.pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.drain("server_stopped")
		}()
	}
	wg.Wait()
	s.mu.Lock()
	for _, g := range s.gateways {
		g.close()
	}
	s.gateways = nil
	s.mu.Unlock()
	s.opts.Audit.Seal()
	if err := s.index(); err != nil { // the records of the ends
		s.logf("%v", err)
	}
}

// recorded makes a request's records durable as the configuration says:
// on the disk before the answer, or written now and on the disk within
// audit_sync.
func (s *Server) recorded() error {
	var err error
	if s.opts.Config.SyncEvery == 0 {
		err = s.opts.Audit.Flush()
	} else {
		err = s.opts.Audit.Write()
	}
	if err != nil {
		s.logf("audit log: %v", err)
	}
	return err
}

// auditError is a step that could not be recorded: not run, or run and
// not on the record.
type auditError struct{ msg string }

func (e *auditError) Error() string { return e.msg }

// recordAction writes a step's action before it runs: no record, no run.
func (s *Server) recordAction() error {
	if err := s.opts.Audit.Write(); err != nil {
		s.logf("audit log: %v", err)
		return &auditError{fmt.Sprintf("the audit log cannot be written (%v); the step was not run", err)}
	}
	return nil
}

// syncer puts what was written on the disk every interval.
func (s *Server) syncer(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := s.opts.Audit.Flush(); err != nil {
			s.logf("audit log: %v", err)
		}
	}
}

// indexEvery is how often the database receives the audit events and
// the sessions' descriptions: off the path of a request, so that the
// index costs a command nothing; a query indexes first.
const indexEvery = 200 * time.Millisecond

// indexer sends the database what is queued every indexEvery (Close sends
// what is left). A failure is logged when it starts and when it ends, not
// every time.
func (s *Server) indexer() {
	defer s.wg.Done()
	t := time.NewTicker(indexEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		err := s.index()
		switch {
		case err != nil && !failing:
			s.logf("%v (kept, and sent again every %v)", err, indexEvery)
		case err == nil && failing:
			s.logf("the database takes the audit index again")
		}
		failing = err != nil
	}
}

// caller is who made a request.
type caller struct {
	token *Token // nil: no valid token
}

func (c caller) name() string {
	if c.token == nil {
		return ""
	}
	return c.token.Name
}

// role is what an endpoint admits.
type role int

const (
	anyToken role = iota // an agent's token (for its own sandboxes) or an admin's
	agentOnly
	adminOnly
	public
)

type handler func(w http.ResponseWriter, r *http.Request, c caller) int

// handle registers an endpoint: the token is checked against the role, the
// handler runs, and the request is recorded in the audit log with the
// token's name and the status it got.
func (s *Server) handle(pattern string, need role, h handler) {
	s.routeList = append(s.routeList, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c := caller{token: s.opts.Config.Identify(bearer(r))}
		r, span := startRequest(r, pattern)
		status := 0
		switch {
		case need == public:
		case c.token == nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="cordon"`)
			status = fail(w, http.StatusUnauthorized, "a valid token is required (Authorization: Bearer TOKEN)")
		case need == agentOnly && c.token.Admin:
			status = fail(w, http.StatusForbidden, "admin tokens manage sandboxes; they do not create them or run commands: use an agent's token")
		case need == adminOnly && !c.token.Admin:
			status = fail(w, http.StatusForbidden, "this needs an admin token")
		}
		if status == 0 {
			status = h(w, r, c)
		}
		s.metrics.request(r.Pattern, status)
		endRequest(span, status, c)
		if need != public || status >= 400 {
			s.record("", c, audit.Decision, "api_request", map[string]any{
				"token": c.name(), "method": r.Method, "path": r.URL.Path, "status": status, "remote": r.RemoteAddr,
			})
		}
	})
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// record adds an event to the audit log and writes it (durable with the
// next flush).
func (s *Server) record(sandboxID string, c caller, kind audit.Kind, typ string, data any) {
	ev := audit.Event{Sandbox: sandboxID, Kind: kind, Type: typ, Data: data}
	if c.token != nil {
		ev.Agent = c.token.Agent
	}
	s.event(ev)
}

// event adds an event to the audit log (the index receives it once it is
// written: see queueIndex).
func (s *Server) event(ev audit.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	s.opts.Audit.Add(ev)
}

// pending is what the database has not received yet: the records the
// audit log wrote, and the sandboxes whose description changed. It has a
// lock of its own: the log hands its records over while it writes, which
// may be for a caller that holds the server's.
type pending struct {
	mu      sync.Mutex
	recs    []audit.Record
	changed map[string]*entry
}

// take empties the queue.
func (p *pending) take() ([]audit.Record, map[string]*entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	recs, changed := p.recs, p.changed
	p.recs, p.changed = nil, map[string]*entry{}
	return recs, changed
}

// putBack returns what the database refused, ahead of what came since.
func (p *pending) putBack(recs []audit.Record, changed map[string]*entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recs = append(recs, p.recs...)
	for id, e := range changed {
		p.changed[id] = e
	}
}

// queueIndex queues what the audit log wrote for the index.
func (s *Server) queueIndex(recs []audit.Record) {
	s.pending.mu.Lock()
	s.pending.recs = append(s.pending.recs, recs...)
	s.pending.mu.Unlock()
}

// touch marks a sandbox whose description the database should get.
func (s *Server) touch(e *entry) {
	e.mu.Lock()
	pooled := e.claimed.IsZero()
	e.mu.Unlock()
	if pooled {
		return
	}
	s.pending.mu.Lock()
	s.pending.changed[e.id] = e
	s.pending.mu.Unlock()
}

// index sends the queued records to the audit index, and the changed
// sandboxes to the sessions, one caller at a time (so that the index
// keeps the log's order); what the database refused stays queued.
func (s *Server) index() error {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	recs, changed := s.pending.take()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.opts.DB.Index(ctx, s.opts.Node, recs); err != nil {
		s.pending.putBack(recs, changed)
		return err
	}
	for _, e := range changed {
		info := e.info()
		info.Node = s.opts.Node
		if err := s.opts.DB.PutSession(ctx, e.id, s.opts.Node, e.agent.Name, info); err != nil {
			s.pending.putBack(nil, changed)
			return err
		}
	}
	return nil
}

// reply writes v as JSON with status, and returns status.
func reply(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
	return status
}

// fail answers with an api.Error.
func fail(w http.ResponseWriter, status int, format string, args ...any) int {
	return reply(w, status, api.Error{Error: fmt.Sprintf(format, args...)})
}

// decode reads a JSON body of at most max bytes into v, refusing unknown
// fields.
func decode(r *http.Request, w http.ResponseWriter, max int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("the request body: %w", err)
	}
	return nil
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "sb-" + hex.EncodeToString(b)
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "cordon serve: "+format+"\n", args...)
}
