// Package server is cordon serve: sandboxes as a service over an HTTP JSON
// API (docs/openapi.yaml). An agent's token creates sandboxes of that
// agent's profile only, runs commands in them with the same outcomes as
// cordon run, moves files in and out through the sandbox itself, and keeps
// them alive or kills them; an admin's token sees every sandbox, decides
// approvals and reads the audit log, and creates nothing. Sandboxes are
// pre-warmed per agent, claimed once, never reused, and ended by idle and
// absolute timeouts. Every request with a valid token is recorded in the
// audit log with the identity of its token; those without one, within a
// rate, the rest counted and summed up.
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
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/statedb"
	"github.com/cordon-sandbox/cordon/internal/token"
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
	// StateDir is the directory the sandboxes' private workspaces are
	// made in (under sandboxes/): its free space is watched, and what a
	// node that stopped uncleanly left there is removed at start. "":
	// neither.
	StateDir string
	// Gateway builds the MCP tool gateway of an agent's profile, served
	// to that agent's tokens at /v1/mcp; record takes its audit events.
	// nil: no MCP endpoint.
	Gateway func(ctx context.Context, a *Agent, p *profile.Profile, record func(...audit.Event) error) (http.Handler, func(), error)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// OnDrain is called when the registry says this node is to drain
	// (cordon serve --drain): the caller stops the server as on SIGTERM.
	OnDrain func()
	// SpoolDir is where the output of commands that do not stream waits
	// for its answer (made private); "": a directory of its own in the
	// system's temporary directory.
	SpoolDir string
}

// Server serves the API.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	metrics *metrics
	// portKey signs port URLs (porturl.go): this process's, so that a URL
	// dies with it.
	portKey [32]byte
	// bgMu guards bgKept, the ended background commands whose output is
	// kept, oldest first (background.go).
	bgMu   sync.Mutex
	bgKept []*bgCommand
	// bounds and conns bound what clients take: requests.go, conns.go.
	bounds *bounds
	conns  *connLimiter
	// uploads are upload bodies waiting for their step.
	uploads *uploads
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
	indexedSeq   int64      // the last record sent to the index; indexMu
	hstate       healthState
	stateLock    *os.File      // the state directory's, when this server holds it
	draining     bool          // Drain began: new requests are refused
	drainBegan   chan struct{} // closed when Drain begins: what runs on until stopped (a watch) stops
	inflight     int           // requests running (see enter)
	drained      chan struct{} // closed when inflight falls to 0 while draining
	closed       bool
	stop         chan struct{}
	wg           sync.WaitGroup
	// slots counts the commands running; cmdLimits bounds them, and what
	// they cost (see Commands); spoolDir holds their output.
	slots     slots
	cmdLimits Commands
	spoolDir  string
	dropSpool bool // spoolDir is the server's own, removed by Close

	forwards map[string]int // forwarded connections open, by sandbox (under mu)

	// incarnation is this run of the node in the registry (nodes.go);
	// beatingSince when its heartbeats last began to succeed without a
	// miss (nanoseconds; 0 after a miss, now after a late beat);
	// lastBeat when its last heartbeat succeeded; drainAsked whether
	// the registry asked it to drain.
	incarnation  atomic.Pointer[string]
	beatingSince atomic.Int64
	lastBeat     atomic.Int64
	// lateSaid: the log says a late heartbeat of this stretch already
	// (the heartbeats' goroutine alone reads and writes it).
	lateSaid   bool
	drainAsked atomic.Bool
	// relay forwards requests to the other nodes (relay.go).
	relay *relay
	// endingNodes are the dead nodes (name NUL incarnation) whose
	// sandboxes this node is ending (under mu).
	endingNodes map[string]bool
	// stopBeats ends the heartbeats, which go on until the node leaves
	// the registry, its sandboxes ended (Close); beatsDone is closed once
	// they have.
	stopBeats, beatsDone chan struct{}
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
		stop: make(chan struct{}), drainBegan: make(chan struct{}), metrics: newMetrics(), pending: pending{changed: map[string]*entry{}}}
	rand.Read(s.portKey[:])
	s.gatewayCtx, s.stopGateways = context.WithCancel(context.Background())
	if err := opts.Config.loadLimits(plainError); err != nil {
		return nil, err
	}
	s.bounds = newBounds()
	s.conns = newConnLimiter(opts.Config.HTTP.MaxConnections, opts.Config.HTTP.MaxConnectionsPerRemote, s.connRefused)
	s.cmdLimits = opts.Config.Commands.limits()
	// An answer's writes wait at most what any write of the server waits.
	s.cmdLimits.Send = opts.Config.HTTP.write
	if err := s.makeSpool(opts.SpoolDir); err != nil {
		return nil, err
	}
	s.uploads = openUploads(s.spoolDir)
	if err := s.register(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.relay = newRelay(s)
	if err := s.recoverAtStart(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
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
	s.stopBeats, s.beatsDone = make(chan struct{}), make(chan struct{})
	go s.heartbeats()
	s.wg.Add(5)
	go s.syncer(every)
	go s.indexer()
	go s.summarizer()
	go s.retainer()
	go s.watchHealth()
	s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the API. Every answer, the mux's
// own redirects included, tells browsers not to guess its content type.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		s.mux.ServeHTTP(w, r)
	})
}

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
	if s.dropSpool {
		os.RemoveAll(s.spoolDir)
	}
	if s.stateLock != nil {
		s.stateLock.Close()
	}
	// Beating until now, the node was not found silent while it ended its
	// sandboxes (and those reported lost); now it leaves.
	close(s.stopBeats)
	<-s.beatsDone
	s.deregister()
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
	return s.auditWritten(err)
}

// auditError is a step that could not be recorded: not run, or run and
// not on the record.
type auditError struct{ msg string }

func (e *auditError) Error() string { return e.msg }

// recordAction writes a step's action before it runs: no record, no run.
func (s *Server) recordAction() error {
	if err := s.recordNow(); err != nil {
		return &auditError{fmt.Sprintf("the audit log cannot be written (%v); the step was not run", err)}
	}
	return nil
}

// recordNow writes what is queued for the audit log (on the disk within
// audit_sync, or with the next flush).
func (s *Server) recordNow() error {
	err := s.auditWritten(s.opts.Audit.Write())
	if err != nil {
		s.logf("audit log: %v", err)
	}
	return err
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
		if err := s.auditWritten(s.opts.Audit.Flush()); err != nil {
			s.logf("audit log: %v", err)
		}
	}
}

// indexEvery is how often the database receives the audit events and
// the sessions' descriptions: off the path of a request, so that the
// index costs a command nothing; a query indexes first.
const indexEvery = 200 * time.Millisecond

// indexer sends the database what is queued every indexEvery (Close sends
// what is left).
func (s *Server) indexer() {
	defer s.wg.Done()
	s.repeat(s.stop, indexEvery, s.index, "(kept, and sent again every "+indexEvery.String()+")", "the database takes the audit index again")
}

// repeat calls f every interval until stop is closed. A failure is
// logged, followed by failing, when it starts, and ok when it ends: not
// every time.
func (s *Server) repeat(stop <-chan struct{}, interval time.Duration, f func() error, failing, ok string) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		err := f()
		switch {
		case err != nil && !failed:
			s.logf("%v %s", err, failing)
		case err == nil && failed:
			s.logf("%s", ok)
		}
		failed = err != nil
	}
}

// caller is who made a request.
type caller struct {
	token *Token // nil: no valid token
	// via is the node that forwarded the request, who the address of the
	// client it came from (relay.go); to is the node this one forwarded
	// it to.
	via, who, to string
	// viaURL: the token's request came through a port URL (porturl.go).
	viaURL bool
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
		w, r, done := s.bound(w, r)
		defer done()
		// A request without a valid token refused before its handler
		// reads its body is answered on a connection that then closes: kept open, the
		// server would first read what is left of the body, and a client
		// that never sends it would hold the connection.
		unread := r.Body != nil && r.Body != http.NoBody && c.token == nil
		if unread {
			w.Header().Set("Connection", "close")
		}
		status, aborted := 0, false
		// A request another node forwarded (relay.go), verified; a public
		// answer is the same for anyone, forwarded or not.
		var forwardErr error
		if need != public {
			var host string
			if c.via, c.who, host, forwardErr = s.forwardedFrom(r, time.Now()); host != "" {
				r.Host = host // as the client sent it (a WebSocket's origin is checked against it)
			}
			// An MCP session's event stream (its GET) lasts as long as the
			// session: a drain does not wait for it (the gateway ends
			// with the server), only for the calls.
			stream := pattern == api.Version+"/mcp" && r.Method == http.MethodGet
			switch {
			case stream && !s.isDraining(): // not counted
			case !stream && s.enter():
				defer s.leave()
			default:
				status = refuseDraining(w)
			}
		}
		if status == 0 {
			// One whose forwarding does not verify is counted as any
			// other request, then refused.
			status = s.admit(w, r, c)
		}
		if status == 0 && forwardErr != nil {
			status = fail(w, http.StatusUnauthorized, "%v", forwardErr)
		}
		switch {
		case status != 0:
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
			if unread {
				w.Header().Del("Connection")
			}
			if n, ok := s.relayTo(r, pattern, c); ok {
				c.to = n.Name
				status, aborted = s.relay.forward(w, r, n)
			} else {
				status, aborted = serveAborting(func() int { return h(w, r, c) })
			}
		} else if unread {
			// Nor is what is left of the body waited for after the
			// answer longer than it takes a body already sent to arrive
			// (closed with unread input, the connection would be reset,
			// the answer lost): the connection ends with it.
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(time.Second))
		}
		s.metrics.request(r.Pattern, status)
		endRequest(span, status, c)
		if need != public || status >= 400 {
			s.recordRequest(r, c, status, aborted)
		}
		if aborted {
			// The answer broke off (its client went away, or the node it
			// was forwarded to): recorded, the connection is cut as the
			// HTTP server cuts it, so that the client sees no whole answer.
			panic(http.ErrAbortHandler)
		}
	})
}

// serveAborting runs a handler that may abort its answer half sent (a
// proxy does, with http.ErrAbortHandler, when either side breaks off): it
// returns the status answered (0 when unknown) and whether it aborted,
// so that the request is recorded all the same.
func serveAborting(h func() int) (status int, aborted bool) {
	defer func() {
		switch v := recover().(type) {
		case nil:
		case abortedAnswer:
			status, aborted = v.status, true
		default:
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	return h(), false
}

// abortedAnswer is what a handler that recorded an answer that broke off
// panics with: its status, for the request's record.
type abortedAnswer struct{ status int }

// bearer is the token of the request's Authorization header (see
// token.Bearer).
func bearer(r *http.Request) string {
	t, _ := token.Bearer(r.Header.Get("Authorization"))
	return t
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
	// behind says records were dropped from recs (the database refused
	// them long enough for maxQueued to pass): the index catches up
	// from the log, which holds them.
	behind bool
}

// maxQueued bounds the records waiting for the database in memory.
const maxQueued = 10000

// bound drops the queued records past maxQueued; p.mu is held.
func (p *pending) bound() {
	if len(p.recs) > maxQueued {
		p.recs, p.behind = nil, true
	}
}

// take empties the queue, and says whether records were dropped from it.
func (p *pending) take() ([]audit.Record, map[string]*entry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	recs, changed, behind := p.recs, p.changed, p.behind
	p.recs, p.changed, p.behind = nil, map[string]*entry{}, false
	return recs, changed, behind
}

// putBack returns what the database refused, ahead of what came since.
func (p *pending) putBack(recs []audit.Record, changed map[string]*entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recs = append(recs, p.recs...)
	p.bound()
	for id, e := range changed {
		p.changed[id] = e
	}
}

// queueIndex queues what the audit log wrote for the index.
func (s *Server) queueIndex(recs []audit.Record) {
	s.pending.mu.Lock()
	s.pending.recs = append(s.pending.recs, recs...)
	s.pending.bound()
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
	recs, changed, behind := s.pending.take()
	if len(recs) == 0 && len(changed) == 0 && !behind {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if behind {
		// Records were dropped from memory: the index takes the log's
		// tail past what it holds, as at a start.
		if _, err := s.reindex(ctx, &recovery{}); err != nil {
			s.pending.mu.Lock()
			s.pending.behind = true
			s.pending.mu.Unlock()
			s.pending.putBack(nil, changed)
			s.indexed(err)
			return err
		}
		seq, _, err := s.opts.DB.LastIndexed(ctx, s.opts.Node)
		if err != nil {
			s.pending.putBack(nil, changed)
			s.indexed(err)
			return err
		}
		s.indexedSeq = seq
	}
	// What the index took from the log already is not sent again.
	fresh := recs[:0:0]
	for _, r := range recs {
		if r.Seq > s.indexedSeq {
			fresh = append(fresh, r)
		}
	}
	recs = fresh
	if err := s.opts.DB.Index(ctx, s.opts.Node, recs); err != nil {
		s.pending.putBack(recs, changed)
		s.indexed(err)
		return err
	}
	if len(recs) > 0 {
		s.indexedSeq = recs[len(recs)-1].Seq
	}
	for _, e := range changed {
		info := e.info()
		info.Node = s.opts.Node
		if err := s.opts.DB.PutSession(ctx, e.id, s.opts.Node, e.agent.Name, info); err != nil {
			s.pending.putBack(nil, changed)
			s.indexed(err)
			return err
		}
	}
	s.indexed(nil)
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

// decode reads a JSON body of at most max bytes into v, strictly (see
// readStrict); bodyStatus is the status of its error.
func decode(r *http.Request, w http.ResponseWriter, max int64, v any) error {
	return readStrict(r, w, max, v)
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "sb-" + hex.EncodeToString(b)
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "cordon serve: "+format+"\n", args...)
}
