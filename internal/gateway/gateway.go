// Package gateway is cordon's MCP tool gateway: an MCP server that offers
// the agent the tools its profile names, each scoped on its own, and
// decides every call in its middleware before anything runs.
//
// The tools are cordon's built-in ones (run, read_file, write_file,
// list_files, fetch; the caller runs each in a sandbox built from the
// profile) and the tools of upstream MCP servers, named SERVER__TOOL. An
// upstream tool is offered only when the profile declares it and pins its
// whole definition by hash (pin.go): a tool whose definition changed since
// it was approved (a "rug pull") is withdrawn, and its new definition never
// reaches the agent. Each server is supervised (supervise.go): restarted
// when it goes down, its tools refused as unavailable meanwhile. Only tools
// are proxied: resources and prompts are refused (unproxied.go). Every call
// goes through the profile's tool policy (toolpolicy: argument
// constraints, budgets, loops, flow rules between labelled data and
// sinks); a refusal is a tool error that says which rule refused and what
// would be allowed. Every call, decision and result shown to the agent is
// recorded.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/telemetry"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// Runner runs a built-in tool with its JSON arguments and returns its JSON
// result; failed says the tool itself failed (its result says why), err
// that it could not be run.
type Runner func(ctx context.Context, tool string, args json.RawMessage) (result []byte, failed bool, err error)

// Config is what a gateway is built from.
type Config struct {
	Profile *profile.Profile
	// Run runs the built-in tools.
	Run Runner
	// Upstreams are the transports to the profile's servers, by name.
	Upstreams map[string]mcp.Transport
	// Dial makes a new transport to a server, for its first connection
	// (when Upstreams has none) and each restart; a server given only in
	// Upstreams is connected once and not restarted.
	Dial map[string]func() (mcp.Transport, error)
	// Restart says how servers that go down are restarted.
	Restart Restart
	// Record writes events to the audit log; an error refuses the call.
	Record func(evs ...audit.Event) error
	// NewID names a session in the audit log.
	NewID   func() string
	Version string
	// Logf reports what the operator should know (stderr).
	Logf func(format string, args ...any)
	// Approvals is the store of requests for approval; without it, a call
	// that needs approval is refused.
	Approvals *approvals.Store
	// ProfileFile names the profile in approval requests.
	ProfileFile string
	// PollEvery is how often a held call looks for its decision.
	PollEvery time.Duration
	// Resolve resolves the path arguments of calls in the view of the
	// sandbox that acts on them; without it, a call that names a file is
	// refused.
	Resolve Resolver
	// Reach says which label rules name a file the built-in run tool can
	// read (see reach.go); without it, a run call carries every label of
	// the profile's rules on paths.
	Reach Reacher
	// FileLabels are the labels of files labelled sessions wrote, as kept
	// beyond earlier gateways (nil: none); SaveFileLabels, when set, keeps
	// them again whenever a call adds to them.
	FileLabels     *toolpolicy.FileLabels
	SaveFileLabels func(*toolpolicy.FileLabels) error
	// Changed finds the files under dirs (relative ones from the
	// workspace) of a sandbox's view (server "" for the built-in tools')
	// changed since a time (see walked.go); without it, a tool server's
	// write is not checked for other files it wrote.
	Changed Changer
	// Workspace is the workspace in the agent's view, from which the
	// relative names of constraints are taken when a call names no file.
	Workspace string
	// OnClose, when set, is called by Close once the upstream connections
	// are ended: what the caller keeps for the gateway's sessions (see
	// CallSession) ends there.
	OnClose func()
}

// Gateway is the MCP server of one profile.
type Gateway struct {
	cfg    Config
	server *mcp.Server

	mu        sync.Mutex
	resolving chan struct{}    // turns to resolve paths (see resolveSlot)
	tools     map[string]*tool // enabled and withdrawn, by the agent's name
	upstreams map[string]*mcp.ClientSession
	links     map[string]*link // every upstream server's state
	sup       *supervisor
	sessions  map[string]*session
	stop      chan struct{} // ends tick
	// waiting are the approval requests a live session waits for.
	waiting map[string]bool
	// asked are the approval questions put to clients' users, by the
	// state they echo (see answer.go).
	asked map[string]*asked
	// withdrawn are the tools the sessions refuse, made anew (never
	// changed) whenever the tools change.
	withdrawn map[string]toolpolicy.Withdrawn
	// hash is the profile's SHA-256, which approval requests carry.
	hash string
	// files are the labels of files written by labelled sessions, which
	// every session reads; made on first use. saved is its count of
	// changes when it was last kept (see keepLabels).
	files *toolpolicy.FileLabels
	saved uint64
	// inflight and wrote are the paths tool servers' writes act on, and
	// when those done lately ended (see writing).
	inflight map[string]int
	wrote    map[string]time.Time
}

// tool is a tool the gateway knows.
type tool struct {
	def      *mcp.Tool // as the agent sees it
	server   string    // "" for a built-in tool
	remote   string    // its name on its server
	hash     string
	canon    []byte // the definition as pinned (Canonical)
	withdraw string // why the tool is not offered; "" when it is
	rule     string // the profile field behind withdraw
	// declared are its arguments, by its input schema; nil until read.
	declared map[string]bool
}

// session is the state of one agent (of all its MCP sessions, see
// identity.go): its policy state and its audit id.
type session struct {
	mu     sync.Mutex
	id     string
	policy *toolpolicy.Session
	who    string    // the agent: its client token's name, "" for stdio's
	start  time.Time // its first call
	// pieces are what the session was shown that may begin a credential
	// printed in pieces across results (see acrossResults).
	pieces []string
}

// New connects to the upstream servers, lists their tools and builds the
// server. Close ends the upstream connections.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	g := &Gateway{cfg: cfg, tools: map[string]*tool{}, upstreams: map[string]*mcp.ClientSession{}, sessions: map[string]*session{}, waiting: map[string]bool{}, hash: cfg.Profile.Hash()}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "cordon", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "cordon decides every tool call against its profile. A refused call returns an error that names the rule that refused it and what would be allowed instead.",
		// Tools only, advertised even while no tool is offered yet.
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	p := cfg.Profile
	for _, name := range p.ToolNames() {
		b, ok := builtins[name]
		if !ok || p.Tools[name].Deny {
			continue
		}
		def := *b
		def.Name = name
		g.tools[name] = &tool{def: &def}
		g.server.AddTool(&def, g.gate(g.runBuiltin))
	}
	g.withdraw()
	g.startUpstreams(ctx)
	g.server.AddReceivingMiddleware(g.enforce)
	g.server.AddReceivingMiddleware(g.unproxied)
	if every := cfg.Profile.CheckpointEvery(); every > 0 {
		g.stop = make(chan struct{})
		go g.tick(every, g.stop)
	}
	return g, nil
}

// tick runs the checkpoints of time (trajectory.every) of every session
// that has one due, and records what held.
func (g *Gateway) tick(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(min(every/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		g.mu.Lock()
		sessions := slices.Collect(maps.Values(g.sessions))
		g.mu.Unlock()
		for _, s := range sessions {
			s.mu.Lock()
			var cps []toolpolicy.Checkpoint
			if s.policy.Tick() {
				cps = s.policy.TakeCheckpoints()
			}
			s.mu.Unlock()
			for _, cp := range cps {
				g.cfg.Logf("session %s: at a checkpoint of time, %s held (%s): %s", s.id, cp.Rule, cp.Action, cp.Reason)
				g.record(s, audit.Event{Kind: audit.Decision, Type: "trajectory_checkpoint", Data: cp})
			}
		}
	}
}

// Server is the MCP server to connect agents to.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Close ends the connections to the upstream servers (and so stops their
// sandboxes), then calls Config.OnClose.
func (g *Gateway) Close() {
	g.stopUpstreams()
	g.mu.Lock()
	if g.stop != nil {
		close(g.stop)
		g.stop = nil
	}
	ups := slices.Collect(maps.Values(g.upstreams))
	g.upstreams = map[string]*mcp.ClientSession{}
	g.mu.Unlock()
	for _, cs := range ups {
		cs.Close()
	}
	if g.cfg.OnClose != nil {
		g.cfg.OnClose()
	}
}

// Status is an upstream tool as the gateway sees it, for cordon mcp tools.
type Status struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Hash        string `json:"hash"`
	Offered     bool   `json:"offered"`
	Why         string `json:"why,omitempty"`
	// Definition is the whole definition as pinned (Canonical); absent
	// when it cannot be pinned.
	Definition json.RawMessage `json:"definition,omitempty"`
}

// Upstream lists the upstream tools, offered or withdrawn, by name.
func (g *Gateway) Upstream() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Status
	for _, name := range slices.Sorted(maps.Keys(g.tools)) {
		t := g.tools[name]
		if t.server == "" {
			continue
		}
		out = append(out, Status{Name: name, Description: t.def.Description, Hash: t.hash, Offered: t.withdraw == "", Why: t.withdraw, Definition: t.canon})
	}
	return out
}

// refresh lists the tools of the server name again and offers those the
// profile declares with a matching pin, withdrawing the others.
func (g *Gateway) refresh(ctx context.Context, server string) error {
	g.mu.Lock()
	cs := g.upstreams[server]
	g.mu.Unlock()
	if cs == nil {
		return nil
	}
	var listed []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		if len(listed) == MaxTools {
			g.cfg.Logf("server %s: lists more than %d tools; the others are not offered", server, MaxTools)
			break
		}
		listed = append(listed, t)
	}
	p := g.cfg.Profile
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.upstreams[server] != cs {
		return nil // the server went down meanwhile
	}
	var add []*tool
	var remove, undeclared []string
	seen := map[string]bool{}
	for _, t := range listed {
		name := server + profile.UpstreamSep + t.Name
		seen[name] = true
		nt := &tool{server: server, remote: t.Name}
		def := *t
		def.Name = name
		nt.def = &def
		canon, hash, perr := pin(&def)
		nt.canon, nt.hash = canon, hash
		decl, declared := p.Tools[name]
		switch {
		case perr != nil:
			nt.def = &mcp.Tool{Name: name}
			nt.withdraw, nt.rule = fmt.Sprintf("%s cannot be pinned: %v", name, perr), "tools."+name+".pin"
		case !declared:
			nt.withdraw, nt.rule = fmt.Sprintf("%s is not declared in the profile (declare it under tools, with its class and pin)", name), "tools"
		case decl.Deny:
			nt.withdraw, nt.rule = fmt.Sprintf("the profile denies %s", name), "tools."+name+".deny"
		case decl.Pin == "":
			nt.withdraw, nt.rule = fmt.Sprintf("%s is not approved: its definition has no pin in the profile (it is %s)", name, nt.hash), "tools."+name+".pin"
		case decl.Pin != nt.hash:
			nt.withdraw, nt.rule = fmt.Sprintf("%s is disabled: its definition changed since it was approved (pinned %s, now %s); review it and pin it again", name, short(decl.Pin), short(nt.hash)), "tools."+name+".pin"
		}
		old := g.tools[name]
		g.tools[name] = nt
		switch {
		case nt.withdraw == "":
			add = append(add, nt)
		case old != nil && old.withdraw == "":
			remove = append(remove, name)
		}
		switch {
		case nt.withdraw == "" || old != nil && old.withdraw == nt.withdraw:
		case nt.rule == "tools":
			undeclared = append(undeclared, name)
		default:
			g.cfg.Logf("%s", nt.withdraw)
		}
	}
	if len(undeclared) > 0 {
		g.cfg.Logf("server %s: not offered, as the profile does not declare them: %s", server, strings.Join(undeclared, ", "))
	}
	for name, t := range g.tools {
		if t.server == server && !seen[name] {
			delete(g.tools, name)
			if t.withdraw == "" {
				remove = append(remove, name)
			}
		}
	}
	for _, t := range add {
		if err := g.offer(t); err != nil {
			t.withdraw, t.rule = fmt.Sprintf("%s is not offered: its definition is not one the gateway can serve (%v)", t.def.Name, err), "tools."+t.def.Name+".pin"
			g.cfg.Logf("%s", t.withdraw)
			remove = append(remove, t.def.Name)
		}
	}
	g.withdraw()
	if len(remove) > 0 {
		g.server.RemoveTools(remove...)
	}
	return nil
}

// withdraw makes the map of withdrawn tools anew: upstream tools that are
// not offered, and tools of the profile that nothing offers. g.mu is held.
func (g *Gateway) withdraw() {
	w := map[string]toolpolicy.Withdrawn{}
	for name, t := range g.tools {
		if t.withdraw != "" {
			w[name] = toolpolicy.Withdrawn{Rule: t.rule, Reason: t.withdraw}
		}
	}
	p := g.cfg.Profile
	for _, name := range p.ToolNames() {
		if g.tools[name] == nil && !p.Tools[name].Deny {
			w[name] = g.unoffered(name)
		}
	}
	g.withdrawn = w
}

func short(hash string) string {
	if len(hash) > 19 {
		return hash[:19]
	}
	return hash
}

// enforce is the middleware every tool call passes: it decides the call,
// records it, and only then lets it run; afterwards it records what the
// agent is shown and brings its labels into the session.
func (g *Gateway) enforce(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.CallToolRequest)
		if !ok || r.Params == nil {
			return nil, fmt.Errorf("cordon: malformed tool call")
		}
		s, full := g.session(r)
		if s == nil {
			return refusal(full), nil
		}
		ctx = context.WithValue(ctx, callSessionKey{}, r.Session)
		name := r.Params.Name
		sent := r.Params.Arguments
		if len(sent) == 0 {
			sent = json.RawMessage("{}")
		}
		ctx, span := traceCall(ctx, name, s.id)
		defer span.End()
		if res, big := g.oversized(ctx, s, name, sent); big {
			return res, nil
		}
		// A call the session refuses whatever it says is decided without
		// its paths being resolved: it starts no sandbox.
		s.mu.Lock()
		refuses := s.policy.Refuses(name)
		s.mu.Unlock()
		c, raw, bad := g.canonical(ctx, name, sent, !refuses)
		if bad != nil {
			return g.refuseArguments(s, name, sent, *bad), nil
		}
		// What was decided is what runs: the tool receives the decided
		// arguments' bytes, and is held to the files they name.
		r.Params.Arguments = raw
		ctx = WithDecidedFiles(ctx, c.Files)
		w := &walked{sess: s}
		ctx = withWalked(ctx, w)
		if answers(r.Params) {
			w.held = true
			// An answer to an approval question: taken only from the
			// session it was put to, for that call (see answer.go). The
			// call was decided when it was first made.
			pa, refused := g.answer(r, s, c, raw)
			if pa == nil {
				return refused, nil
			}
			// Held to the files the user approved, not to those its
			// paths name now.
			if len(pa.req.Files) > 0 {
				ctx = WithDecidedFiles(ctx, policyFiles(pa.req.Files))
			}
			ctx = context.WithValue(ctx, approvalKey{}, pa)
			res, err := next(ctx, method, req)
			return g.after(ctx, s, c, pa.req.Step, res, err)
		}

		g.mu.Lock()
		withdrawn := g.withdrawn
		if g.files == nil {
			g.files = g.cfg.FileLabels
			if g.files == nil {
				g.files = toolpolicy.NewFileLabels()
			}
			g.saved = g.files.Changes()
		}
		files := g.files
		g.mu.Unlock()
		s.mu.Lock()
		// The session refuses withdrawn tools, and does not suggest them.
		s.policy.Withdraw(withdrawn)
		s.policy.ShareFiles(files)
		d := s.policy.Decide(c)
		step := s.policy.Steps()
		checkpoints := s.policy.TakeCheckpoints()
		labels := s.policy.Labels()
		secret := slices.Contains(labels, secretLabel)
		s.mu.Unlock()
		traceDecision(ctx, step, d, labels)
		for _, cp := range checkpoints {
			g.cfg.Logf("session %s: at step %d, %s held (%s): %s", s.id, cp.Step, cp.Rule, cp.Action, cp.Reason)
			g.record(s, audit.Event{Kind: audit.Decision, Type: "trajectory_checkpoint", Data: cp})
		}
		// The policy's reasons are cordon's words, quoting labels and the
		// call that brought one in (logged as it was when made); a name of
		// no tool is the agent's, kept as its arguments are.
		logged := g.logName(name, secret)
		reason := d.Reason
		if logged != name {
			reason = strings.Replace(reason, name, logged, 1)
		}
		decision := map[string]any{"tool": logged, "step": step, "session": s.id, "allow": d.Allow, "rule": d.Rule, "reason": logReason(reason, false)}
		if d.Because > 0 {
			decision["because"] = d.Because
		}
		if d.Limit != "" {
			decision["limit"] = d.Limit
		}
		if d.Approval {
			decision["held"] = true
		}
		if err := g.record(s,
			audit.Event{Kind: audit.Action, Type: "tool_call", Data: callRecord(c, logged, raw, sent, step, s.id, secret)},
			audit.Event{Kind: audit.Decision, Type: "tool_decision", Data: decision},
		); err != nil {
			return refusal(toolpolicy.Decision{Rule: "audit", Reason: fmt.Sprintf("the call could not be recorded (%v), so it was not made", err)}), nil
		}
		approved := ""
		if d.Approval {
			w.held = true
			wctx, wait := telemetry.Start(ctx, spanApproval)
			req, refused := g.hold(wctx, r, s, c, raw, step, d)
			wait.End()
			if refused != nil {
				return refused, nil
			}
			if g.cfg.Profile.ApprovalPolicy().Via == "elicitation" {
				ctx = context.WithValue(ctx, approvalKey{}, &pendingApproval{id: req.ID, req: req, sess: s, call: c, def: g.definition(c.Tool)})
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, req.Expires)
				defer cancel()
			} else {
				approved = req.ID
			}
		} else if !d.Allow {
			return refusal(d), nil
		}
		w.reached = g.reached(ctx, name, labels)
		w.started = time.Now()
		rctx, run := telemetry.Start(ctx, spanRun)
		res, err := next(rctx, method, req)
		run.End()
		if approved != "" {
			g.cfg.Approvals.Finish(approved, resultSummary(res, err))
		}
		return g.after(ctx, s, c, step, res, err)
	}
}

// sameJSON compares two JSON values; numbers are compared as written (a
// float64 would take 9007199254740993 for 9007199254740992).
func sameJSON(a, b []byte) bool {
	decode := func(b []byte) ([]byte, bool) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil, false
		}
		out, err := json.Marshal(v)
		return out, err == nil
	}
	ja, ok := decode(a)
	jb, ok2 := decode(b)
	return ok && ok2 && bytes.Equal(ja, jb)
}

// definition is the hash of the pinned definition of the tool offered as
// name, "" for a built-in tool, or "-" when it is not offered.
func (g *Gateway) definition(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.definitionLocked(name)
}

func (g *Gateway) definitionLocked(name string) string {
	t := g.tools[name]
	if t == nil || t.withdraw != "" {
		return "-"
	}
	return t.hash
}

// after records what a call's result shows the agent, and brings its
// labels into the session; an input request (a question for the client's
// user) is not a result.
func (g *Gateway) after(ctx context.Context, s *session, c toolpolicy.Call, step int, res mcp.Result, err error) (mcp.Result, error) {
	name := c.Tool
	ctr, _ := res.(*mcp.CallToolResult)
	if ctr != nil && ctr.InputRequests != nil {
		return res, err
	}
	failed := err != nil || ctr == nil || ctr.IsError
	// Whatever reaches the agent brings its labels, an error included;
	// only cordon's own refusals show nothing of the tool's.
	refused := false
	if ctr != nil {
		var d toolpolicy.Decision
		d, refused = ctr.Meta["cordon/refusal"].(toolpolicy.Decision)
		if refused && d.Rule == ruleFiles {
			g.pathChanged(ctx, s, c, step, d)
			if w := walkedOf(ctx); w == nil || !w.named {
				failed = false // not the agent's doing: no loop of its
			}
		}
	}
	// What the agent is shown: an error's text, or the result's content,
	// its structured content and the bytes of its blobs; all of it is
	// scanned for credentials.
	var shownBytes, structured []byte
	var found, foundLabels []string
	var text []byte // the text shown, for acrossResults
	if err != nil {
		text = []byte(err.Error())
		found, foundLabels = scanResult(text)
	} else if ctr != nil {
		ctr, res = g.cutResult(ctr, res)
		shownBytes, _ = json.Marshal(ctr.Content)
		if ctr.StructuredContent != nil {
			structured, _ = json.Marshal(ctr.StructuredContent)
		}
		parts := shownParts(ctr)
		text = parts[1]
		found, foundLabels = scanResult(parts...)
	}
	if !refused {
		s.mu.Lock()
		across := acrossResults(s, text)
		s.mu.Unlock()
		for _, r := range across {
			if !slices.Contains(found, r) {
				found, foundLabels = append(found, r), []string{secretLabel}
			}
		}
	}
	var created *toolpolicy.Call
	if !failed && !refused {
		s.mu.Lock()
		labelled := len(s.policy.Labels()) > 0
		s.mu.Unlock()
		if labelled {
			created = g.created(ctx, c)
		}
	}
	s.mu.Lock()
	secret := s.carriesSecret()
	s.policy.Record(step, c, failed, !refused)
	if created != nil {
		s.policy.LabelCreated(*created)
	}
	s.policy.Received(len(shownBytes) + len(structured))
	labels := s.policy.ResultLabels(c)
	if !refused && len(foundLabels) > 0 {
		// A credential in a result labels it as if its tool returned it.
		s.policy.AddLabels(step, c, foundLabels)
		labels = slices.Compact(slices.Sorted(slices.Values(append(labels, foundLabels...))))
	}
	var reached []string
	if w := walkedOf(ctx); w != nil && !refused {
		reached = w.reached
	}
	if len(reached) > 0 {
		// What the command's view holds: as if its result carried it.
		s.policy.AddLabels(step, c, reached)
		labels = slices.Compact(slices.Sorted(slices.Values(append(labels, reached...))))
	}
	s.mu.Unlock()
	if !refused {
		g.labelRunWrites(ctx, s, c)
	}
	g.keepLabels()
	shown := map[string]any{"tool": name, "step": step, "session": s.id, "failed": failed}
	if !refused && len(labels) > 0 {
		shown["labels"] = labels
	}
	if !refused && len(foundLabels) > 0 {
		shown["found"] = foundLabels
	}
	if len(reached) > 0 {
		shown["reached"] = reached
	}
	if err != nil {
		// The error's text reaches the agent too: kept as arguments are,
		// cut, its credentials replaced, and all of it when it is secret.
		r := redactor{secret: secret || slices.Contains(labels, secretLabel), budget: previewBytes}
		shown["error"] = r.text(strings.ToValidUTF8(err.Error(), "\uFFFD"))
	} else if ctr != nil {
		withContent(shown, shownBytes, labels, found, secret)
		if structured != nil {
			shown["structured_bytes"] = len(structured)
			shown["structured_sha256"] = digest(structured)
		}
	}
	if rerr := g.record(s, audit.Event{Kind: audit.Input, Type: "tool_result", Data: shown}); rerr != nil {
		return refusal(toolpolicy.Decision{Rule: "audit", Reason: fmt.Sprintf("the result could not be recorded (%v), so it is not shown", rerr)}), nil
	}
	return res, err
}

// keepLabels keeps the labels of written files (Config.SaveFileLabels)
// when a call added to them. What cannot be kept still holds for this
// gateway's life; the operator is told.
func (g *Gateway) keepLabels() {
	g.mu.Lock()
	files, saved := g.files, g.saved
	g.mu.Unlock()
	if files == nil || g.cfg.SaveFileLabels == nil {
		return
	}
	n := files.Changes()
	if n == saved {
		return
	}
	if err := g.cfg.SaveFileLabels(files); err != nil {
		g.cfg.Logf("the labels of files written by labelled sessions could not be kept (%v): they hold until this gateway ends", err)
		return
	}
	g.mu.Lock()
	g.saved = max(g.saved, n)
	g.mu.Unlock()
}

// previewBytes is how much of a result the audit log keeps.
const previewBytes = 4096

func preview(b []byte) string {
	if len(b) > previewBytes {
		b = b[:previewBytes]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (g *Gateway) record(s *session, evs ...audit.Event) error {
	if g.cfg.Record == nil {
		return nil
	}
	for i := range evs {
		evs[i].Sandbox = s.id
		evs[i].Agent = g.cfg.Profile.Agent
	}
	return g.cfg.Record(evs...)
}

// refusal is the tool error an agent gets for a refused call: what was
// refused, by which rule, and what would be allowed.
func refusal(d toolpolicy.Decision) *mcp.CallToolResult {
	text := fmt.Sprintf("cordon refused this call (rule %s): %s.", d.Rule, d.Reason)
	if d.Hint != "" {
		text += " What is allowed: " + d.Hint + "."
	}
	// The decision itself goes in _meta: structured content would have to
	// match the tool's output schema, which describes its results.
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{"cordon/refusal": d},
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
	}
}

// runBuiltin runs a built-in tool through the configured runner.
func (g *Gateway) runBuiltin(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw := req.Params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	ctx, err := g.redecide(ctx, req.Params.Name, raw)
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cordon did not run the tool: " + err.Error()}}}, nil
	}
	out, failed, err := g.cfg.Run(ctx, req.Params.Name, raw)
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cordon could not run the tool: " + err.Error()}}}, nil
	}
	out = bytes.TrimRight(out, "\n")
	res := &mcp.CallToolResult{IsError: failed, Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}
	if json.Valid(out) {
		res.StructuredContent = json.RawMessage(out)
	}
	return res, nil
}

// runUpstream forwards a call to the tool's server.
func (g *Gateway) runUpstream(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t, cs, refused := g.upstreamOf(req.Params.Name)
	if refused != nil {
		return refused, nil
	}
	files := DecidedFiles(ctx)
	check := stamped(files)
	reads := g.cfg.Profile.Tools[req.Params.Name].Class == "read"
	if check {
		var why string
		if files, why = g.checkBefore(ctx, t, files); why != "" {
			return refusal(toolpolicy.Decision{Rule: ruleFiles, Reason: why + "; the call was not made"}), nil
		}
	}
	if check && !reads {
		defer g.writing(files)()
	}
	started := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: req.Params.Arguments})
	res, err = g.upstreamResult(ctx, t, cs, res, err)
	if check && err == nil {
		if why := g.checkAfter(ctx, t, reads, files, started); why != "" {
			return refusal(toolpolicy.Decision{Rule: ruleFiles, Reason: fmt.Sprintf("%s while %s ran: it may have acted on a file no decision saw, so what it returned is withheld", why, req.Params.Name)}), nil
		}
	}
	return res, err
}
