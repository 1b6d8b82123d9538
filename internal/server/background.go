package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// Background commands (an exec with background: true) are answered as
// soon as they started; their output is kept as a command's is (bounded
// by the profile's output limit and commands.max_output), and their
// outcome is asked for later, or waited for. Each holds a command slot
// while it runs, as any command does.
const (
	// maxBackground bounds the background commands running at once in one
	// sandbox.
	maxBackground = 16
	// keepBackground bounds those a sandbox keeps, ended ones dropped
	// (their output with them) oldest first.
	keepBackground = 64
)

// bgCommand is a background command of a sandbox.
type bgCommand struct {
	id      string
	agent   string
	args    []string
	started time.Time
	cancel  context.CancelFunc
	out     *output
	// dropOnce closes out once, when the output is no longer kept; dropped
	// says so to getCommand.
	dropOnce sync.Once
	done     chan struct{}
	// Set before done is closed.
	o   outcome.Outcome
	err error
}

func (b *bgCommand) ended() bool { return isDone(b.done) }

// info describes the command for the API.
func (b *bgCommand) info() api.Command {
	c := api.Command{ID: b.id, Args: b.args, Started: b.started.UTC(), State: "running"}
	if b.ended() {
		c.State = "ended"
		if b.err == nil {
			o := b.o
			c.Outcome = &o
		}
	}
	return c
}

// startBackground starts cmd in e in the background, as the step begin
// decides, holding the command slot release frees; the answer is 202 with
// the command, or the step's refusal.
func (s *Server) startBackground(w http.ResponseWriter, ctx context.Context, e *entry, c caller, cmd sandbox.ExecOptions, k *keyed, release func()) int {
	e.mu.Lock()
	running := 0
	for _, b := range e.bg {
		if !b.ended() {
			running++
		}
	}
	e.mu.Unlock()
	if running >= maxBackground {
		release()
		k.done(0, false, nil)
		w.Header().Set("Retry-After", "1")
		return fail(w, http.StatusTooManyRequests, "sandbox %s runs %d background commands already", e.id, maxBackground)
	}
	if inTurn(e.profile) {
		// Its trajectory rules take one step at a time: a command that
		// runs on would hold every later step.
		release()
		k.done(0, false, nil)
		return fail(w, http.StatusConflict, "sandbox %s's profile has trajectory rules that take one step at a time: a background command would hold every later step; run it in the foreground", e.id)
	}
	// The approver sees that it runs on, detached.
	what := func() (any, error) {
		v, err := execWhat(cmd)()
		if m, ok := v.(map[string]any); ok {
			m["background"] = true
		}
		return v, err
	}
	if err := s.begin(e, c, "exec", what); err != nil {
		release()
		answer := api.Error{Error: execError(e, err), Approval: heldFor(err)}
		status := execStatus(err)
		k.done(status, false, answer)
		return reply(w, status, answer)
	}
	// The command outlives the request: it ends by kill, by the
	// sandbox's end, or by the server's (Close waits for it).
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-e.box.Done():
		case <-s.stop:
		case <-bctx.Done():
		}
		cancel()
	}()
	id := make([]byte, 8)
	rand.Read(id)
	b := &bgCommand{id: "cmd-" + hex.EncodeToString(id), agent: e.agent.Name, args: cmd.Args, started: s.opts.Now(), cancel: cancel, done: make(chan struct{})}
	b.out = s.newOutput(e.profile, cancel)
	e.mu.Lock()
	e.bg = append(e.bg, b)
	for len(e.bg) > keepBackground {
		i := 0
		for i < len(e.bg) && !e.bg[i].ended() {
			i++
		}
		if i == len(e.bg) {
			break
		}
		s.dropOutput(e.bg[i])
		e.bg = append(e.bg[:i], e.bg[i+1:]...)
	}
	e.mu.Unlock()
	// The key keeps this answer: a retry with it starts nothing again.
	markStarted(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer release()
		defer cancel()
		o, err := s.runCommand(bctx, e, c, cmd, b.out.stream(0), b.out.stream(1))
		if err == nil {
			err = b.out.failed()
		}
		b.o, b.err = o, err
		// Kept before it is seen to end: a waiter woken by done finds it.
		s.keepOutput(b)
		close(b.done)
	}()
	info := b.info()
	k.done(http.StatusAccepted, false, info)
	return reply(w, http.StatusAccepted, info)
}

// keepOutput counts an ended background command's kept output against
// the server's bound: at most as many as commands.per_server, the bound of
// outputs spooled at once before there were background commands. Past
// it, the oldest of the agent keeping the most is dropped (its command
// then answers 404 for it): an agent within its share loses nothing to
// another's flood.
func (s *Server) keepOutput(b *bgCommand) {
	s.bgMu.Lock()
	s.bgKept = append(s.bgKept, b)
	var drop []*bgCommand
	for len(s.bgKept) > max(s.cmdLimits.PerServer, 1) {
		count := map[string]int{}
		most := b.agent
		for _, k := range s.bgKept {
			count[k.agent]++
			if count[k.agent] > count[most] {
				most = k.agent
			}
		}
		for i, k := range s.bgKept {
			if k.agent == most {
				drop = append(drop, k)
				s.bgKept = append(s.bgKept[:i], s.bgKept[i+1:]...)
				break
			}
		}
	}
	s.bgMu.Unlock()
	for _, d := range drop {
		d.dropOnce.Do(d.out.Close)
	}
}

// dropOutput drops an ended command's kept output.
func (s *Server) dropOutput(b *bgCommand) {
	s.bgMu.Lock()
	for i, k := range s.bgKept {
		if k == b {
			s.bgKept = append(s.bgKept[:i], s.bgKept[i+1:]...)
			break
		}
	}
	s.bgMu.Unlock()
	b.dropOnce.Do(b.out.Close)
}

// kept reports whether b's output is kept.
func (s *Server) kept(b *bgCommand) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	for _, k := range s.bgKept {
		if k == b {
			return true
		}
	}
	return false
}

// backgroundRoutes are the background commands' routes.
func (s *Server) backgroundRoutes() {
	s.handle("GET "+api.Version+"/sandboxes/{id}/commands", agentOnly, s.listCommands)
	s.handle("GET "+api.Version+"/sandboxes/{id}/commands/{command}", agentOnly, s.getCommand)
	s.handle("POST "+api.Version+"/sandboxes/{id}/commands/{command}/kill", agentOnly, s.killCommand)
}

// command is the background command the request names, or the status
// already answered.
func (s *Server) command(w http.ResponseWriter, r *http.Request, c caller, live bool) (*entry, *bgCommand, int) {
	var e *entry
	var status int
	if live {
		e, status = s.live(w, r, c)
	} else {
		e, status = s.lookup(w, r, c)
	}
	if e == nil {
		return nil, nil, status
	}
	id := r.PathValue("command")
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.bg {
		if b.id == id {
			return e, b, 0
		}
	}
	return nil, nil, fail(w, http.StatusNotFound, "sandbox %s has no background command %s (it keeps the last %d)", e.id, id, keepBackground)
}

func (s *Server) listCommands(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.lookup(w, r, c)
	if e == nil {
		return status
	}
	e.mu.Lock()
	list := make([]api.Command, 0, len(e.bg))
	for _, b := range e.bg {
		list = append(list, b.info())
	}
	e.mu.Unlock()
	return reply(w, http.StatusOK, list)
}

// getCommand answers a background command: running, its description;
// ended (or with wait=1, once it ended), its output and outcome as an
// exec's, or its error.
func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, c caller) int {
	e, b, status := s.command(w, r, c, false)
	if b == nil {
		return status
	}
	switch r.URL.Query().Get("wait") {
	case "", "0", "false":
	case "1", "true":
		select {
		case <-b.done:
		case <-r.Context().Done():
			return reply(w, http.StatusOK, b.info())
		}
	default:
		return fail(w, http.StatusBadRequest, "wait: want 1 or 0, found %q", r.URL.Query().Get("wait"))
	}
	if !b.ended() {
		return reply(w, http.StatusOK, b.info())
	}
	if b.err != nil {
		return reply(w, execStatus(b.err), api.Error{Error: execError(e, b.err), Sandbox: e.id})
	}
	if !s.kept(b) {
		return fail(w, http.StatusNotFound, "the output of background command %s is no longer kept (the server keeps at most %d ended commands' output, dropping first the oldest of the agent that keeps the most); its outcome: %s", b.id, max(s.cmdLimits.PerServer, 1), b.o.Status)
	}
	return s.sendResult(w, http.StatusOK, nil, b.out, b.o)
}

// killCommand ends a background command (its process group); the answer
// says how it is, the outcome once it ended (within 10 s).
func (s *Server) killCommand(w http.ResponseWriter, r *http.Request, c caller) int {
	_, b, status := s.command(w, r, c, true)
	if b == nil {
		return status
	}
	b.cancel()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
	case <-r.Context().Done():
	}
	return reply(w, http.StatusOK, b.info())
}
