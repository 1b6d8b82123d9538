package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/statedb"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

var (
	errStopping = errors.New("the server is stopping")
	errTooMany  = errors.New("too many sandboxes")
	// errUnavailable: the agent's profile cannot be used now.
	errUnavailable = errors.New("no sandboxes for this agent now")
)

// endFirstCommand is why a sandbox whose first command, sent with its
// create, could not be run was ended.
const endFirstCommand = "first_command"

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.handle("GET "+api.Version+"/health", public, s.health)
	s.handle("GET "+api.Version+"/openapi.yaml", public, serveOpenAPI)
	s.handle("GET /metrics", adminOnly, s.serveMetrics)
	s.handle(createPattern, agentOnly, s.create)
	s.handle("GET "+api.Version+"/sandboxes", anyToken, s.list)
	s.handle("GET "+api.Version+"/sandboxes/{id}", anyToken, s.get)
	s.handle("DELETE "+api.Version+"/sandboxes/{id}", anyToken, s.kill)
	s.handle("POST "+api.Version+"/sandboxes/{id}/keepalive", agentOnly, s.keepalive)
	s.handle("POST "+api.Version+"/sandboxes/{id}/exec", agentOnly, s.exec)
	s.handle("GET "+api.Version+"/sandboxes/{id}/files", agentOnly, s.download)
	s.handle("PUT "+api.Version+"/sandboxes/{id}/files", agentOnly, s.upload)
	s.dirRoutes()
	s.fileOpRoutes()
	s.backgroundRoutes()
	s.changeRoutes()
	s.handle(api.Version+"/mcp", agentOnly, s.mcp)
	s.adminRoutes()
	s.uiRoutes()
	s.handle("/", public, func(w http.ResponseWriter, r *http.Request, c caller) int {
		return fail(w, http.StatusNotFound, "no such endpoint: %s %s (see %s/openapi.yaml)", r.Method, r.URL.Path, api.Version)
	})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, c caller) int {
	// The body may carry a first command: it takes a command's slot
	// before it is read.
	release, status := s.slot(w, c.token.Agent, "")
	if release == nil {
		return status
	}
	defer release()
	var req api.CreateRequest
	if status := s.decodeCommand(w, r, &req, func() []byte {
		if req.Exec == nil {
			return nil
		}
		return req.Exec.Stdin
	}); status != 0 {
		return status
	}
	if req.Exec == nil {
		release()
	}
	var cmd sandbox.ExecOptions
	if req.Exec != nil {
		var err error
		if cmd, err = checkExec(*req.Exec); err != nil {
			return fail(w, bodyStatus(err), "exec.%v", err)
		}
		if req.Exec.Stream {
			return fail(w, http.StatusBadRequest, "exec.stream: the first command's output comes whole with the sandbox; stream later commands")
		}
	}
	lifetime, err := parseLifetime(req)
	if err != nil {
		return fail(w, bodyStatus(err), "%v", err)
	}
	if req.Agent != "" && req.Agent != c.token.Agent {
		// A token never gets another agent's profile.
		s.metrics.denial(c.token.Agent, "access.agent")
		return fail(w, http.StatusForbidden, "token %s is bound to agent %s; it cannot create sandboxes of agent %s", c.token.Name, c.token.Agent, req.Agent)
	}
	k, ctx, status := s.beginKey(w, r, c, "create", digestable(req))
	if ctx == nil {
		return status
	}
	a := s.opts.Config.Agents[c.token.Agent]
	if p, perr := a.Current(); perr == nil {
		if err := checkTimeout(cmd.Timeout, p); err != nil {
			k.done(0, false, nil)
			return fail(w, http.StatusBadRequest, "exec.%v", err)
		}
	}
	if lifetime > a.Lifetime {
		k.done(0, false, nil)
		return fail(w, http.StatusBadRequest, "timeout: %v is longer than agent %s's max_lifetime (%v), which bounds every sandbox", lifetime, a.Name, a.Lifetime)
	}
	e, err := s.claim(a, c)
	switch {
	case errors.Is(err, errTooMany):
		status = fail(w, http.StatusTooManyRequests, "%v", err)
	case errors.Is(err, errStopping), errors.Is(err, errUnavailable):
		status = fail(w, http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		status = fail(w, http.StatusInternalServerError, "building a sandbox of agent %s: %v", a.Name, err)
	}
	if err != nil {
		k.done(status, false, nil)
		return status
	}
	e.mu.Lock()
	e.env = req.Env
	if lifetime > 0 {
		e.deadline = s.opts.Now().Add(lifetime)
	}
	e.mu.Unlock()
	if req.Exec != nil && len(req.Env) > 0 {
		// The first command is one of the sandbox's: its env under the
		// command's own (checked above, so this holds too, but for the
		// caps on both together).
		if cmd, err = sandboxEnv(e, *req.Exec); err != nil {
			s.end(e, endFirstCommand)
			k.done(0, false, nil)
			return fail(w, bodyStatus(err), "exec.%v", err)
		}
	}
	s.metrics.claimed(a.Name, e.warm)
	// No record, no sandbox: its start is written now (on the disk with
	// its first command), or it is ended and the create refused.
	if err := s.recordNow(); err != nil {
		s.end(e, "unrecorded")
		k.done(0, false, nil)
		return unrecorded(w, "the sandbox's start", err)
	}
	markStarted(ctx)
	if req.Exec == nil {
		info := e.info()
		info.Node = s.opts.Node
		k.done(http.StatusCreated, false, info)
		return reply(w, http.StatusCreated, info)
	}
	defer s.inSandbox(e.id)()
	out, o, err := s.runBuffered(ctx, e, c, cmd)
	if err != nil {
		// The first command could not be run (refused, held, unrecorded,
		// or the sandbox failed): no sandbox is handed over as if all went
		// well. It is ended, and the answer is the step's own status, with
		// the sandbox's id (a command that ran and failed is a result).
		why := execError(e, err)
		s.end(e, endFirstCommand)
		status, answer := execStatus(err), api.Error{Error: fmt.Sprintf("sandbox %s was ended: its first command could not be run: %s", e.id, why), Sandbox: e.id, Approval: heldFor(err)}
		k.done(status, false, answer)
		return reply(w, status, answer)
	}
	defer out.Close()
	info := e.info()
	info.Node = s.opts.Node
	kept := info
	r2 := keptOutput(r.Header.Get(KeyHeader), out, o)
	kept.Result = &r2
	k.done(http.StatusCreated, false, kept)
	return s.sendResult(w, http.StatusCreated, &info, out, o)
}

// visible returns the sandboxes the caller may see: its agent's, or all
// for an admin.
func (s *Server) visible(c caller) []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*entry
	for _, e := range s.entries {
		if c.token.Admin || e.agent.Name == c.token.Agent {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].claimed.Before(out[j].claimed) })
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, c caller) int {
	out := []api.Sandbox{}
	for _, e := range s.visible(c) {
		info := e.info()
		info.Node = s.opts.Node
		out = append(out, info)
	}
	remote, err := s.remote(r.Context(), c, "")
	if err != nil {
		return fail(w, http.StatusBadGateway, "%v", err)
	}
	return reply(w, http.StatusOK, append(out, remote...))
}

// remote returns the sandboxes of the other nodes sharing the database
// that the caller may see (id "" for all of them, else that one).
func (s *Server) remote(ctx context.Context, c caller, id string) ([]api.Sandbox, error) {
	var sessions []statedb.Session
	if id != "" {
		sess, err := s.opts.DB.SessionByID(ctx, id)
		if errors.Is(err, statedb.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		sessions = append(sessions, sess)
	} else {
		agent := c.token.Agent
		var err error
		if sessions, err = s.opts.DB.Sessions(ctx, s.opts.Node, agent, keepEnded+DefaultMaxLifetime); err != nil {
			return nil, err
		}
	}
	var out []api.Sandbox
	for _, sess := range sessions {
		if sess.Node == s.opts.Node || (!c.token.Admin && sess.Agent != c.token.Agent) {
			continue
		}
		var sb api.Sandbox
		if json.Unmarshal(sess.Info, &sb) == nil {
			sb.Node = sess.Node
			out = append(out, sb)
		}
	}
	return out, nil
}

// lookup finds the sandbox of the request for the caller; another agent's
// sandbox is answered as one that does not exist.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, c caller) (*entry, int) {
	id := r.PathValue("id")
	s.mu.Lock()
	e := s.entries[id]
	s.mu.Unlock()
	if e == nil || (!c.token.Admin && e.agent.Name != c.token.Agent) {
		if e != nil {
			s.metrics.denial(c.token.Agent, "access.sandbox")
		} else if remote, _ := s.remote(r.Context(), c, id); len(remote) == 1 {
			if r.Method == http.MethodGet && r.URL.Path == api.Version+"/sandboxes/"+id {
				return nil, reply(w, http.StatusOK, remote[0])
			}
			if remote[0].State == "ended" {
				return nil, fail(w, http.StatusGone, "sandbox %s has ended (%s)", id, remote[0].Ended)
			}
			return nil, fail(w, http.StatusMisdirectedRequest, "sandbox %s runs on node %s, which this node cannot forward to (no cluster.advertise and secret on both, or the node is not live): send the request there", id, remote[0].Node)
		}
		return nil, fail(w, http.StatusNotFound, "no sandbox %s", id)
	}
	return e, 0
}

// live is lookup for a sandbox that must still run.
func (s *Server) live(w http.ResponseWriter, r *http.Request, c caller) (*entry, int) {
	e, status := s.lookup(w, r, c)
	if e == nil {
		return nil, status
	}
	if why := e.state(); why != "" {
		return nil, fail(w, http.StatusGone, "sandbox %s has ended (%s)", e.id, why)
	}
	return e, 0
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.lookup(w, r, c)
	if e == nil {
		return status
	}
	info := e.info()
	info.Node = s.opts.Node
	return reply(w, http.StatusOK, info)
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.lookup(w, r, c)
	if e == nil {
		return status
	}
	if e.state() == "" {
		// The kill is written before it is done: a sandbox is not
		// ended unrecorded on request.
		s.record(e.id, c, audit.Action, "kill", map[string]any{"token": c.name()})
		if err := s.recordNow(); err != nil {
			return unrecorded(w, "the kill", err)
		}
	}
	if err := s.end(e, "killed"); err != nil {
		return fail(w, http.StatusInternalServerError, "sandbox %s was killed, but its end could not be recorded: %v", e.id, err)
	}
	return reply(w, http.StatusOK, e.info())
}

func (s *Server) keepalive(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.live(w, r, c)
	if e == nil {
		return status
	}
	s.record(e.id, c, audit.Action, "keepalive", map[string]any{"token": c.name()})
	if err := s.recordNow(); err != nil {
		return unrecorded(w, "the keep-alive", err)
	}
	e.mu.Lock()
	e.touched = s.opts.Now()
	e.mu.Unlock()
	return reply(w, http.StatusOK, e.info())
}

// inTurn says whether the steps of a session of p run one at a time:
// when its trajectory rules can hold or stop the session, each step is
// decided once the one before it was counted and the rules evaluated
// (steps sent at once would otherwise all pass a rule meant to hold the
// next one).
func inTurn(p *profile.Profile) bool {
	t := p.Trajectory
	if t == nil {
		return false
	}
	if t.Probing != nil {
		return true
	}
	for _, r := range t.Rules {
		if r.Action != "warn" {
			return true
		}
	}
	return false
}

// takeTurn waits until no other step of e runs, and returns the turn
// that finish gives back.
func (e *entry) takeTurn() chan struct{} {
	e.mu.Lock()
	if e.turn == nil {
		e.turn = make(chan struct{}, 1)
	}
	turn := e.turn
	e.mu.Unlock()
	turn <- struct{}{}
	return turn
}

// begin starts a step of the sandbox's session (kind, and what it does,
// which a person approving it sees, described only when it is held):
// refused when a trajectory rule stopped the session; held when one asked
// for a person (see hold).
func (s *Server) begin(e *entry, c caller, kind string, what func() (any, error)) (err error) {
	if inTurn(e.profile) {
		turn := e.takeTurn()
		defer func() {
			if err != nil {
				<-turn // the step did not start: the next may
			}
		}()
	}
	e.mu.Lock()
	cp := e.session.stopped
	if cp == nil {
		e.running++
		e.commands++
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	if cp.Action == "approve" && s.opts.Approvals != nil {
		if err := s.hold(e, c, cp, kind, what); err != nil {
			return err
		}
		e.mu.Lock()
		e.running++
		e.commands++
		e.mu.Unlock()
		return nil
	}
	s.metrics.denial(e.agent.Name, cp.Rule)
	return fmt.Errorf("the session of sandbox %s was stopped at step %d: %s held (%s)", e.id, cp.Step, cp.Rule, cp.Reason)
}

// finish ends a step: counts it in the session, evaluates the trajectory
// rules at a checkpoint, and records what held. A stop rule ends the
// sandbox.
func (s *Server) finish(e *entry, kind, file string, o *outcome.Outcome, refused bool) {
	e.mu.Lock()
	e.running--
	e.touched = s.opts.Now()
	cps, due := e.session.step(e.profile, kind, file, o, refused, e.touched)
	turn := e.turn
	e.mu.Unlock()
	if inTurn(e.profile) {
		<-turn // counted, its rules evaluated: the next step may start
	}
	s.touch(e)
	if o != nil {
		for _, ev := range o.Egress {
			if ev.Decision == "deny" {
				s.metrics.denial(e.agent.Name, "network.allow")
			}
		}
	}
	s.checkpointed(e, cps, due)
}

// checkpointed records the rules that held at a checkpoint of e's session
// and, when one was due and the profile sets checkpoints, checks e for
// drift; a stop rule, or drift that stops, ends the sandbox.
func (s *Server) checkpointed(e *entry, cps []toolpolicy.Checkpoint, due bool) {
	stop := false
	for _, cp := range cps {
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "trajectory_checkpoint", Data: cp})
		if cp.Action == "stop" || (cp.Action == "approve" && s.opts.Approvals == nil) {
			// With no approval store to hold the session in, approve
			// stops it: failing closed.
			s.metrics.denial(e.agent.Name, cp.Rule)
			stop = true
		}
	}
	// A profile without a trajectory section has no checkpoints of its
	// own (every step would be one): its drift checks keep to their own
	// interval, off the commands' path.
	if due && e.profile.Trajectory != nil {
		if d, ok := e.box.(interface{ CheckDrift() []string }); ok {
			if changes := d.CheckDrift(); len(changes) > 0 {
				s.metrics.drift(e.agent.Name)
				s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "drift", Data: map[string]any{"changes": changes, "stops": e.profile.DriftStops()}})
				if e.profile.DriftStops() {
					go s.end(e, "drift")
				}
			}
		}
	}
	if stop {
		go s.end(e, "trajectory")
	}
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, c caller) int {
	// A command's slot is taken before its body is read: the sandbox by
	// the id the request names (a sandbox gone with its node is answered
	// from the key below).
	release, status := s.slot(w, c.token.Agent, r.PathValue("id"))
	if release == nil {
		return status
	}
	// A background command takes the slot with it.
	handedOver := false
	defer func() {
		if !handedOver {
			release()
		}
	}()
	var req api.ExecRequest
	if status := s.decodeCommand(w, r, &req, func() []byte { return req.Stdin }); status != 0 {
		return status
	}
	cmd, err := checkExec(req)
	if err != nil {
		return fail(w, bodyStatus(err), "%v", err)
	}
	if req.Background && req.Stream {
		return fail(w, http.StatusBadRequest, "background and stream: a background command's output is asked for later (GET %s/sandboxes/{id}/commands/{command})", api.Version)
	}
	// The key first: a command of a sandbox gone with its node is
	// answered from the key.
	k, ctx, status := s.beginKey(w, r, c, "exec "+r.PathValue("id"), digestable(api.CreateRequest{Exec: &req}))
	if ctx == nil {
		return status
	}
	e, status := s.live(w, r, c)
	if e == nil {
		k.done(status, false, nil)
		return status
	}
	if err := checkTimeout(cmd.Timeout, e.profile); err != nil {
		k.done(0, false, nil)
		return fail(w, http.StatusBadRequest, "%v", err)
	}
	if cmd, err = sandboxEnv(e, req); err != nil {
		k.done(0, false, nil)
		return fail(w, bodyStatus(err), "%v", err)
	}
	if req.Background {
		handedOver = true
		return s.startBackground(w, ctx, e, c, cmd, k, release)
	}
	key := r.Header.Get(KeyHeader)
	if !req.Stream {
		out, o, err := s.runBuffered(ctx, e, c, cmd)
		if err != nil {
			status, answer := execStatus(err), api.Error{Error: execError(e, err), Approval: heldFor(err)}
			k.done(status, false, answer)
			return reply(w, status, answer)
		}
		defer out.Close()
		k.done(http.StatusOK, false, keptOutput(key, out, o))
		return s.sendResult(w, http.StatusOK, nil, out, o)
	}
	if err := s.begin(e, c, "exec", execWhat(cmd)); err != nil {
		k.done(0, false, nil)
		return failStep(w, err)
	}
	// A client that stops reading cannot hold the command: past the send
	// timeout, its output is dropped (still counted and recorded).
	g := newSendGuard(w, s.cmdLimits.Send)
	defer g.done()
	sw := newStreamWriter(g)
	stdout, stderr := newDigestWriter(sw.stream(false)), newDigestWriter(sw.stream(true))
	o, err := s.runCommand(ctx, e, c, cmd, stdout, stderr)
	last := api.ExecEvent{Outcome: &o}
	if err != nil {
		last = api.ExecEvent{Error: execError(e, err), HTTPStatus: execStatus(err)}
	}
	sw.flush()
	sw.send(last)
	last.Replay = &api.Replay{Key: key, StdoutBytes: stdout.n, StdoutSHA256: stdout.sum(), StderrBytes: stderr.n, StderrSHA256: stderr.sum(), Note: replayNote}
	k.done(http.StatusOK, true, last)
	return http.StatusOK
}

// sandboxEnv is the command req in e: checkExec's options, with the
// environment the sandbox's create gave under the command's own.
func sandboxEnv(e *entry, req api.ExecRequest) (sandbox.ExecOptions, error) {
	req.Env = withCreateEnv(e, req.Env)
	return checkExec(req)
}

// withCreateEnv is own under the environment e's create gave: own's
// values win.
func withCreateEnv(e *entry, own map[string]string) map[string]string {
	e.mu.Lock()
	base := e.env
	e.mu.Unlock()
	if len(base) == 0 {
		return own
	}
	env := maps.Clone(base)
	maps.Copy(env, own)
	return env
}

// envList is env as a command's environment: NAME=value, sorted.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// parseLifetime checks a create's env and timeout: the env as a
// command's (names, caps), the timeout a duration of at least a second.
func parseLifetime(req api.CreateRequest) (time.Duration, error) {
	if len(req.Env) > 0 {
		if _, err := checkExec(api.ExecRequest{Args: []string{"env"}, Env: req.Env}); err != nil {
			return 0, err
		}
	}
	if req.Timeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(req.Timeout)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("timeout: want a duration of at least 1s, such as 30m, found %q", req.Timeout)
	}
	return d, nil
}

// checkExec checks an exec request and turns it into the command's
// options.
func checkExec(req api.ExecRequest) (sandbox.ExecOptions, error) {
	if len(req.Args) == 0 {
		return sandbox.ExecOptions{}, errors.New("args: name the command to run")
	}
	if err := checkSize(req); err != nil {
		return sandbox.ExecOptions{}, err
	}
	if req.Dir != "" && !path.IsAbs(req.Dir) {
		return sandbox.ExecOptions{}, fmt.Errorf("dir: want an absolute path inside the sandbox, found %q", req.Dir)
	}
	timeout, err := parseTimeout(req.Timeout)
	if err != nil {
		return sandbox.ExecOptions{}, err
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return sandbox.ExecOptions{}, fmt.Errorf("env: %q is not a variable name", k)
		}
	}
	opts := sandbox.ExecOptions{Args: req.Args, Dir: req.Dir, Timeout: timeout}
	if len(req.Env) > 0 {
		opts.Env = envList(req.Env)
	}
	if len(req.Stdin) > 0 {
		opts.Stdin = bytes.NewReader(req.Stdin)
	}
	return opts, nil
}

// runBuffered runs a command as one step, its output kept for the answer
// (see output; the caller closes it).
func (s *Server) runBuffered(ctx context.Context, e *entry, c caller, cmd sandbox.ExecOptions) (*output, outcome.Outcome, error) {
	if err := s.begin(e, c, "exec", execWhat(cmd)); err != nil {
		return nil, outcome.Outcome{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := s.newOutput(e.profile, cancel)
	out.sums = [2]*digestWriter{newDigestWriter(out.stream(0)), newDigestWriter(out.stream(1))}
	o, err := s.runCommand(ctx, e, c, cmd, out.sums[0], out.sums[1])
	if err == nil {
		err = out.failed()
	}
	if err != nil {
		out.Close()
		return nil, o, err
	}
	return out, o, nil
}

// runCommand runs a command in e, as the step begin started, its output
// going to stdout and stderr, and records it: the action, then its
// outcome and what the agent was shown.
func (s *Server) runCommand(ctx context.Context, e *entry, c caller, cmd sandbox.ExecOptions, stdout, stderr io.Writer) (outcome.Outcome, error) {
	names := make([]string, len(cmd.Env))
	for i, kv := range cmd.Env {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	stdin := 0
	if r, ok := cmd.Stdin.(*bytes.Reader); ok {
		stdin = r.Len()
	}
	action := map[string]any{"argv": cmd.Args, "cwd": cmd.Dir, "env": names, "token": c.name(), "stdin_bytes": stdin}
	if cmd.Timeout > 0 {
		action["timeout"] = cmd.Timeout.String()
	}
	if cmd.Terminal != nil {
		action["terminal"] = true
	}
	s.record(e.id, c, audit.Action, "exec", action)
	if err := s.recordAction(); err != nil {
		s.finish(e, "exec", "", nil, true)
		return outcome.Outcome{}, err
	}
	markStarted(ctx)
	caps := [2]*audit.Capture{audit.NewCapture(captureMax), audit.NewCapture(captureMax)}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(stdout, caps[0]), io.MultiWriter(stderr, caps[1])
	ctx, span := startExec(ctx, e)
	o, err := e.box.Exec(ctx, cmd)
	endExec(span, o, err)
	o.Sandbox = e.id
	if err == nil {
		if landed := s.landAfter(e, c.name()); landed != nil {
			o.Changes = landed
		}
	}
	if k, ok := stdout.(interface{ outputNote() string }); ok && err == nil {
		if note := k.outputNote(); note != "" {
			o.Notes = append(o.Notes, note)
		}
	}
	if rerr := s.afterExec(e, c, &o, err, caps); rerr != nil && err == nil {
		return o, &auditError{fmt.Sprintf("the command ran (%s), but its record could not be written (%v): as with cordon run, that is not success", o.Status, rerr)}
	}
	return o, err
}

// afterExec records a command's outcome and what the agent was shown, and
// counts it in the session and the metrics.
func (s *Server) afterExec(e *entry, c caller, o *outcome.Outcome, err error, caps [2]*audit.Capture) error {
	if err != nil {
		s.record(e.id, c, audit.Decision, "exec_failed", map[string]any{"error": err.Error()})
	} else {
		if o.Limit != nil {
			s.record(e.id, c, audit.Decision, "limit", map[string]any{"name": o.Limit.Name, "value": o.Limit.Value, "status": o.Status})
		}
		for _, ev := range o.Egress {
			s.record(e.id, c, audit.Decision, "network", ev)
		}
		s.record(e.id, c, audit.Decision, "outcome", o)
		s.record(e.id, c, audit.Input, "result", caps[0].Summary("stdout"))
		s.record(e.id, c, audit.Input, "result", caps[1].Summary("stderr"))
		limit := ""
		if o.Limit != nil {
			limit = o.Limit.Name
		}
		s.metrics.command(e.agent.Name, string(o.Status), limit)
	}
	s.finish(e, "exec", "", o, err != nil)
	return s.recorded()
}

// execError says why a command could not run.
func execError(e *entry, err error) string {
	if errors.Is(err, sandbox.ErrEnded) {
		why := e.box.Why()
		if why == "" {
			why = "stopped"
		}
		return fmt.Sprintf("sandbox %s has ended (%s)", e.id, why)
	}
	return err.Error()
}

// captureMax is how much of each stream the audit log keeps per command.
const captureMax = 4 << 10

// streamWriter sends a command's output as JSON lines as it comes. A
// piece that ends inside a UTF-8 character keeps the character's start for
// the next piece (at most 3 bytes, until the next write or flush), so that
// UTF-8 output comes in pieces that are each text.
type streamWriter struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	held [2][]byte
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &streamWriter{w: w, rc: http.NewResponseController(w)}
}

func (sw *streamWriter) send(ev api.ExecEvent) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.sendLocked(ev)
}

func (sw *streamWriter) sendLocked(ev api.ExecEvent) error {
	b, err := jsonLine(ev)
	if err != nil {
		return err
	}
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// piece sends p as a piece of stream i (0 stdout, 1 stderr), with its
// text when it is valid UTF-8.
func (sw *streamWriter) piece(i int, p []byte) {
	if len(p) == 0 {
		return
	}
	var ev api.ExecEvent
	text := ""
	if utf8.Valid(p) {
		text = string(p)
	}
	if i == 0 {
		ev.Stdout, ev.StdoutText = p, text
	} else {
		ev.Stderr, ev.StderrText = p, text
	}
	sw.sendLocked(ev)
}

// stream returns the writer of one output stream. A client that went away
// does not stop the command's output from being counted.
func (sw *streamWriter) stream(stderr bool) io.Writer {
	i := 0
	if stderr {
		i = 1
	}
	return writerFunc(func(p []byte) (int, error) {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		b := p
		if len(sw.held[i]) > 0 {
			b = append(sw.held[i], p...)
			sw.held[i] = nil
		}
		n := incompleteTail(b)
		sw.piece(i, b[:len(b)-n])
		if n > 0 {
			sw.held[i] = append([]byte(nil), b[len(b)-n:]...)
		}
		return len(p), nil
	})
}

// flush sends what the streams held back: the output has ended.
func (sw *streamWriter) flush() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for i := range sw.held {
		sw.piece(i, sw.held[i])
		sw.held[i] = nil
	}
}
