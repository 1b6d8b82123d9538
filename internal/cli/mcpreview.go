package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// sessionSandboxes are the sandboxes of a gateway whose profile reviews the
// workspace: one kept alive for each MCP session, started at its first
// built-in call, in which all its built-in calls (and the resolution of
// their paths) run, so that they see and write one layer over the host's
// workspace. When the session ends (its client closes or deletes it, it
// idles out, the gateway stops) or the sandbox does (a limit), what the
// layer holds is kept as a change set named by the sandbox's id, and the
// host's workspace is untouched.
type sessionSandboxes struct {
	e    *env
	p    *profile.Profile
	file string // the profile's file, "" for the embedded one
	r    *probeRunner

	mu     sync.Mutex
	by     map[*mcp.ServerSession]*sessionSandbox
	closed bool
}

// newSessionSandboxes returns the session sandboxes of a gateway of p, or
// nil when p does not review the workspace, or guards it (each call then
// runs in a sandbox of its own). The change sets must wait where no sandbox sees
// them.
func newSessionSandboxes(e *env, p *profile.Profile, file string, r *probeRunner) (*sessionSandboxes, error) {
	if !p.Workspace.Reviewed() || p.Workspace.Guarded() {
		// A guarded workspace lands each call's changes when its sandbox
		// ends: each call has a sandbox of its own.
		return nil, nil
	}
	if err := changesOutsideView(e, p); err != nil {
		return nil, err
	}
	return &sessionSandboxes{e: e, p: p, file: file, r: r, by: map[*mcp.ServerSession]*sessionSandbox{}}, nil
}

// changesOutsideView refuses a state directory that p's sandboxes can see:
// change sets wait there.
func changesOutsideView(e *env, p *profile.Profile) error {
	if where := visibleIn(e, p, e.cwd, filepath.Join(changesDir(), "set")); where != "" {
		return fmt.Errorf("cordon's state directory %s, where the changes would wait, is inside %s, which the sandbox can see: set CORDON_STATE_DIR elsewhere", changesDir(), where)
	}
	return nil
}

// inSession reports whether the call of ctx runs in a session's sandbox.
func (s *sessionSandboxes) inSession(ctx context.Context) bool {
	return s != nil && gateway.CallSession(ctx) != nil
}

// execFor runs the commands of the call of ctx in its session's sandbox;
// a call without a session (or a profile that does not review the
// workspace: s nil) runs them through fallback.
func (s *sessionSandboxes) execFor(ctx context.Context, fallback toolExec) toolExec {
	if !s.inSession(ctx) {
		return fallback
	}
	ss := gateway.CallSession(ctx)
	return func(args []string, selfExec bool, stdin []byte, stdout, stderr func(io.Reader)) (outcome.Outcome, error) {
		sb, err := s.of(ss)
		if err != nil {
			return outcome.Outcome{}, err
		}
		return sb.exec(ctx, args, selfExec, stdin, stdout, stderr)
	}
}

// of is the sandbox of the session ss, made (not yet started) at its first
// call; it ends when the session does.
func (s *sessionSandboxes) of(ss *mcp.ServerSession) (*sessionSandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the gateway is stopping: no call runs any more")
	}
	sb := s.by[ss]
	if sb == nil {
		sb = &sessionSandbox{s: s}
		s.by[ss] = sb
		go func() {
			ss.Wait()
			// Ended before it leaves the map: close, which ends what the
			// map holds, waits for this end too.
			sb.end()
			s.mu.Lock()
			delete(s.by, ss)
			s.mu.Unlock()
		}()
	}
	return sb, nil
}

// close ends every session's sandbox, keeping its changes, and waits for
// that; nothing starts afterwards. Nil-safe, and idempotent.
func (s *sessionSandboxes) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	var all []*sessionSandbox
	for ss, sb := range s.by {
		all = append(all, sb)
		delete(s.by, ss)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, sb := range all {
		wg.Go(sb.end)
	}
	wg.Wait()
}

// sessionSandbox is the sandbox of one session.
type sessionSandbox struct {
	s *sessionSandboxes

	mu      sync.Mutex // held while it starts
	box     *sandbox.Box
	a       *auditor // its records; a.id names the sandbox and its change set
	started time.Time
	ended   bool
	endOnce sync.Once
}

// get returns the session's sandbox, started at the first call.
func (sb *sessionSandbox) get() (*sandbox.Box, *auditor, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.ended || sb.box != nil && (sb.box.Ended() || sb.box.Why() != "") {
		// Ended, or ending: a limit ends the sandbox as a whole.
		return nil, nil, sb.endedErr()
	}
	if sb.box != nil {
		return sb.box, sb.a, nil
	}
	s := sb.s
	a := &auditor{id: newSessionID(), agent: s.p.Agent}
	if s.r.audit != nil {
		a = s.r.audit.run(s.p)
	}
	opts := sandbox.Options{
		Profile: s.p, AllowDegraded: s.r.allow, Cwd: s.e.cwd, LookupEnv: s.e.getenv,
		Guard: s.r.guard, ProfileFile: s.file, WalkIndex: walkIndexDir(s.e, s.p),
		CacheRoot: cacheRoot(s.e, s.p), JournalDir: journalDir(s.e, s.p),
	}
	if a.log != nil {
		opts.OnEgress = a.network
		if err := a.log.Append(a.startEvent(s.p, s.file)); err != nil {
			return nil, nil, fmt.Errorf("audit log: %w (the session's sandbox was not started)", err)
		}
	}
	// Host files changed from now on are conflicts when applied.
	started := time.Now()
	box, err := sandbox.Start(opts)
	if err != nil {
		return nil, nil, err
	}
	sb.box, sb.a, sb.started = box, a, started
	go func() {
		// A limit (the workspace's size, memory, ...) ends the sandbox:
		// its changes are kept at once, and later calls are refused.
		<-box.Done()
		sb.end()
	}()
	return box, a, nil
}

// endedErr says why a call cannot run in the session's sandbox any more;
// sb.mu is held.
func (sb *sessionSandbox) endedErr() error {
	if sb.box == nil {
		return errors.New("the session has ended")
	}
	why := "it was stopped"
	if w := sb.box.Why(); w != "" {
		why = "it reached its limit " + w
	}
	return fmt.Errorf("the session's sandbox has ended (%s): no later call of this session runs; its changes up to then are kept: cordon changes %s", why, sb.a.id)
}

// exec runs one command in the session's sandbox, recorded as a command
// of that sandbox in the audit log.
func (sb *sessionSandbox) exec(ctx context.Context, args []string, selfExec bool, stdin []byte, stdout, stderr func(io.Reader)) (outcome.Outcome, error) {
	box, a, err := sb.get()
	if err != nil {
		return outcome.Outcome{}, err
	}
	s := sb.s
	if a.log != nil {
		a.log.Add(a.execEvent(s.p, args, s.e.cwd, s.e.getenv))
	}
	keep := defaultCapture
	if s.r.audit != nil {
		keep = s.r.audit.capture
	}
	caps := [2]*audit.Capture{audit.NewCapture(keep), audit.NewCapture(keep)}
	writers, done := readersOf(stdout, stderr)
	x := sandbox.ExecOptions{Args: args, SelfExec: selfExec,
		Stdout: io.MultiWriter(writers[0], caps[0]), Stderr: io.MultiWriter(writers[1], caps[1])}
	if stdin != nil {
		x.Stdin = bytes.NewReader(stdin)
	}
	o, err := box.Exec(ctx, x)
	done()
	if err != nil && (errors.Is(err, sandbox.ErrEnded) || box.Why() != "") {
		// Ended by a limit, perhaps as the command was handed over.
		sb.mu.Lock()
		err = sb.endedErr()
		sb.mu.Unlock()
	}
	o.Sandbox = a.id
	if a.log != nil {
		if o.Limit != nil {
			a.log.Add(a.event(audit.Decision, "limit", map[string]any{"name": o.Limit.Name, "value": o.Limit.Value, "status": o.Status}))
		}
		a.log.Add(a.event(audit.Decision, "outcome", o),
			a.event(audit.Input, "result", caps[0].Summary("stdout")), a.event(audit.Input, "result", caps[1].Summary("stderr")))
		if aerr := a.log.Seal(); aerr != nil && err == nil {
			err = fmt.Errorf("audit log: %w", aerr)
		}
	}
	return o, err
}

// end stops the session's sandbox once, keeps what its layer holds as
// the change set named by its id, records it and says where it waits.
func (sb *sessionSandbox) end() {
	sb.endOnce.Do(func() {
		sb.mu.Lock()
		sb.ended = true
		box, a, started := sb.box, sb.a, sb.started
		sb.mu.Unlock()
		if box == nil {
			return // no call started it
		}
		s := sb.s
		keep := keepChanges(s.e, s.p, s.file, a.id, started)
		var c *outcome.Changes
		var err error
		box.CloseWith(func(layer *os.File) { c, err = keep(layer) })
		if c == nil {
			c = &outcome.Changes{Set: a.id}
			if err == nil {
				err = errors.New("the sandbox handed no layer: nothing was kept")
			}
		}
		if err != nil {
			c.Error = err.Error()
		}
		if a.log != nil {
			a.endNetwork()
			if aerr := a.log.Append(a.event(audit.Action, "changes", c)); aerr != nil {
				fmt.Fprintf(s.e.stderr, "cordon: audit log: %v (the change set %s is not recorded)\n", aerr, a.id)
			}
		}
		why := ""
		if w := box.Why(); w != "" {
			why = " (it reached its limit " + w + ")"
		}
		switch {
		case c.Error != "":
			fmt.Fprintf(s.e.stderr, "cordon: the session's sandbox %s ended%s; its changes were not kept: %s\n", a.id, why, termsafe.Line(c.Error))
		case c.Entries == 0:
			fmt.Fprintf(s.e.stderr, "cordon: the session's sandbox %s ended%s; it changed nothing in the workspace\n", a.id, why)
		default:
			fmt.Fprintf(s.e.stderr, "cordon: the session's sandbox %s ended%s; %d change(s) wait for review: cordon changes %s (then cordon apply %s, or cordon discard %s)\n",
				a.id, why, c.Entries, a.id, a.id, a.id)
		}
	})
}

// readersOf are the writers a command's stdout and stderr go to, each
// read by its function until done closes them and waits for both (what
// a reader leaves is drained).
func readersOf(stdout, stderr func(io.Reader)) (writers [2]io.Writer, done func()) {
	var pipes [2]*io.PipeWriter
	var readers sync.WaitGroup
	for i, read := range []func(io.Reader){stdout, stderr} {
		rd, w := io.Pipe()
		pipes[i], writers[i] = w, w
		readers.Go(func() {
			read(rd)
			io.Copy(io.Discard, rd)
		})
	}
	return writers, func() {
		pipes[0].Close()
		pipes[1].Close()
		readers.Wait()
	}
}
