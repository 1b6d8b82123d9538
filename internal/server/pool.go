package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// entry is one sandbox of the server, from the moment it is built.
type entry struct {
	id      string
	agent   *Agent
	profile *profile.Profile // the one it was built from
	box     Sandbox
	sha     string
	built   time.Time
	warm    bool
	coldMS  int64
	endOnce sync.Once
	ending  atomic.Bool // the janitor is ending it

	mu       sync.Mutex
	claimed  time.Time
	touched  time.Time // claimed, kept alive, or a command ended
	commands int
	running  int
	ended    string
	endedAt  time.Time
	session  session
	// turn lets one step at a time run when the profile's trajectory
	// rules can hold or stop the session (see inTurn).
	turn chan struct{}
	// review is the change set of a reviewed workspace; nil when the
	// workspace is not reviewed (see changes.go).
	review *review
	// env is set for every command (the create's Env); deadline ends the
	// sandbox (the create's Timeout; zero: only max_lifetime does).
	// Both are set once, when it is claimed.
	env      map[string]string
	deadline time.Time
	// bg are its background commands (background.go), oldest first.
	bg []*bgCommand
}

// expires is when the sandbox ends whatever is done with it: its
// max_lifetime, or the deadline its create gave. The caller holds e.mu.
func (e *entry) expires() time.Time {
	end := e.built.Add(e.agent.Lifetime)
	if !e.deadline.IsZero() && e.deadline.Before(end) {
		return e.deadline
	}
	return end
}

// info describes the entry for the API.
func (e *entry) info() api.Sandbox {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := api.Sandbox{ID: e.id, Agent: e.agent.Name, Profile: e.agent.Profile, ProfileSHA256: e.sha,
		Created: e.claimed.UTC(), Warm: e.warm, ColdStartMS: e.coldMS, State: "running",
		Commands: e.commands, Running: e.running, Reviewed: e.review != nil,
		IdleExpires: e.touched.Add(e.agent.Idle).UTC(), Expires: e.expires().UTC()}
	if e.ended != "" {
		out.State, out.Ended = "ended", e.ended
	}
	sess := e.session.api()
	out.Session = &sess
	return out
}

// idle is how long the entry has gone without a command or a keep-alive.
func (e *entry) idle(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running > 0 {
		return 0
	}
	return now.Sub(e.touched)
}

// pool keeps an agent's sandboxes built and waiting, so that a create
// claims one instead of building it. A sandbox is taken out once and never
// comes back.
type pool struct {
	s     *Server
	a     *Agent
	ready chan *entry
	wake  chan struct{}
}

func newPool(s *Server, a *Agent) *pool {
	return &pool{s: s, a: a, ready: make(chan *entry, a.Pool), wake: make(chan struct{}, 1)}
}

// fill builds sandboxes until the pool is full, and again after each claim.
// A build that fails is retried after a pause that grows to a minute.
func (p *pool) fill() {
	defer p.s.wg.Done()
	if p.a.Pool == 0 {
		return
	}
	pause := time.Second
	for {
		for len(p.ready) < cap(p.ready) {
			select {
			case <-p.s.stop:
				return
			default:
			}
			if _, err := p.a.Current(); err != nil {
				break // the janitor wakes the pool when the profile is fixed
			}
			e, err := p.s.build(p.a, true)
			if err != nil {
				p.s.logf("agent %s: pre-warming a sandbox: %v (next try in %s)", p.a.Name, err, pause)
				select {
				case <-p.s.stop:
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, time.Minute)
				continue
			}
			pause = time.Second
			p.ready <- e // never blocks: only this loop adds
			p.s.metrics.warm(p.a.Name, len(p.ready))
		}
		select {
		case <-p.s.stop:
			return
		case <-p.wake:
		}
		// The replacement is built a moment later, not while the sandbox
		// just claimed runs its first command (building takes more CPU
		// than a command, on a host of few cores).
		select {
		case <-p.s.stop:
			return
		case <-time.After(refillDelay):
		}
	}
}

// refillDelay is how long after a claim the pool starts its replacement.
const refillDelay = 20 * time.Millisecond

// take returns a waiting sandbox that is still alive and young enough, or
// nil, and asks for a new one to be built.
func (p *pool) take() *entry {
	defer p.refill()
	for {
		select {
		case e := <-p.ready:
			p.s.metrics.warm(p.a.Name, len(p.ready))
			select {
			case <-e.box.Done():
				p.s.end(e, "ended_while_waiting")
				continue
			default:
			}
			if p.s.opts.Now().Sub(e.built) >= p.a.Lifetime {
				p.s.end(e, "max_lifetime")
				continue
			}
			if !p.s.untouched(e) {
				continue
			}
			return e
		default:
			return nil
		}
	}
}

// drain ends every waiting sandbox, for why.
func (p *pool) drain(why string) {
	for {
		select {
		case e := <-p.ready:
			p.s.end(e, why)
		default:
			p.s.metrics.warm(p.a.Name, 0)
			return
		}
	}
}

// refill asks the pool to fill up.
func (p *pool) refill() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// build builds one sandbox of a, recorded in the audit log.
func (s *Server) build(a *Agent, warm bool) (*entry, error) {
	p, err := a.Current()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	if p.Workspace.Guarded() && s.opts.StateDir == "" {
		return nil, fmt.Errorf("%w: agent %s: a guarded workspace's changes land through the server's state directory, and this server keeps none", errUnavailable, a.Name)
	}
	id := newID()
	t0 := time.Now()
	box, err := s.opts.Start(a, p, id)
	took := time.Since(t0)
	s.metrics.started(a.Name, warm, err, took)
	s.built(a.Name, err)
	if err != nil {
		s.event(audit.Event{Sandbox: id, Agent: a.Name, Kind: audit.Decision, Type: "start_failed", Data: map[string]any{"error": err.Error()}})
		return nil, err
	}
	now := s.opts.Now()
	e := &entry{id: id, agent: a, profile: p, box: box, sha: p.Hash(), built: now, warm: warm, touched: now, review: reviewOf(p, box)}
	if !warm {
		e.coldMS = took.Milliseconds()
	}
	return e, nil
}

// claim gives the caller a sandbox of agent a: a pre-warmed one, or one
// built now.
func (s *Server) claim(a *Agent, c caller) (*entry, error) {
	// The count and the reservation are one step: claims side by side
	// cannot pass max_sandboxes together.
	s.mu.Lock()
	live := s.claiming[a.Name]
	for _, e := range s.entries {
		if e.agent == a && e.state() == "" {
			live++
		}
	}
	if s.closed {
		s.mu.Unlock()
		return nil, errStopping
	}
	if live >= a.MaxSandboxes {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: agent %s has %d live sandboxes, its max_sandboxes", errTooMany, a.Name, live)
	}
	s.claiming[a.Name]++
	s.mu.Unlock()
	if err := s.clusterFull(); err != nil {
		s.mu.Lock()
		s.claiming[a.Name]--
		s.mu.Unlock()
		return nil, err
	}
	e := s.pools[a.Name].take()
	if e == nil {
		var err error
		if e, err = s.build(a, false); err != nil {
			s.mu.Lock()
			s.claiming[a.Name]--
			s.mu.Unlock()
			return nil, err
		}
	}
	now := s.opts.Now()
	e.mu.Lock()
	e.claimed, e.touched = now, now
	e.mu.Unlock()
	e.review.start()
	if err := s.reserveCluster(e); err != nil {
		s.end(e, "cluster_full")
		s.mu.Lock()
		s.claiming[a.Name]--
		s.mu.Unlock()
		return nil, err
	}
	// The reservation becomes the entry in one step.
	s.mu.Lock()
	s.entries[e.id] = e
	s.claiming[a.Name]--
	s.mu.Unlock()
	s.touch(e)
	s.record(e.id, c, audit.Decision, "start", map[string]any{
		"token": c.name(), "profile": a.Profile, "profile_sha256": e.sha, "warm": e.warm, "node": s.opts.Node,
	})
	return e, nil
}

func (e *entry) state() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended
}

// end stops a sandbox once, and records why; it returns the error of
// that record (nil when the sandbox had ended before).
func (s *Server) end(e *entry, why string) (err error) {
	e.endOnce.Do(func() {
		s.closeBox(e)
		if own := e.box.Why(); own != "" && why == "ended" {
			why = own
			if own == "drift" { // the sandbox's own drift watcher stopped it
				s.metrics.drift(e.agent.Name)
			}
		}
		e.mu.Lock()
		e.ended, e.endedAt = why, s.opts.Now()
		e.mu.Unlock()
		s.metrics.ended(e.agent.Name, why)
		s.touch(e)
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "end", Data: map[string]any{"reason": why}})
		err = s.recorded()
	})
	return err
}

// endAside ends e apart from the janitor's round, once: the final capture
// of a reviewed or guarded workspace (and a guarded one's landing) takes
// as long as its layer is large, and delays no other sandbox's end.
func (s *Server) endAside(e *entry, why string) {
	if !e.ending.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.end(e, why)
	}()
}

// janitor ends the sandboxes that ended by themselves (a limit, drift),
// were idle too long or lived too long, and forgets ended ones after a
// while.
func (s *Server) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for tick := 0; ; tick++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if tick%8 == 0 {
			s.reloadProfiles()
			s.scheduleProbes()
		}
		now := s.opts.Now()
		s.mu.Lock()
		var check []*entry
		for id, e := range s.entries {
			e.mu.Lock()
			ended, at := e.ended, e.endedAt
			e.mu.Unlock()
			if ended != "" {
				if now.Sub(at) > keepEnded {
					delete(s.entries, id)
					// Its background commands ended with it: their
					// output goes with it.
					e.mu.Lock()
					bg := e.bg
					e.bg = nil
					e.mu.Unlock()
					for _, b := range bg {
						if b.ended() {
							s.dropOutput(b)
						}
					}
				}
				continue
			}
			check = append(check, e)
		}
		s.mu.Unlock()
		for _, e := range check {
			select {
			case <-e.box.Done():
				s.endAside(e, "ended")
				continue
			default:
			}
			e.mu.Lock()
			deadline := e.deadline
			e.mu.Unlock()
			switch {
			case now.Sub(e.built) >= e.agent.Lifetime:
				s.endAside(e, "max_lifetime")
			case !deadline.IsZero() && !now.Before(deadline):
				s.endAside(e, "timeout")
			case e.idle(now) >= e.agent.Idle:
				s.endAside(e, "idle_timeout")
			default:
				s.timedCheckpoint(e)
			}
		}
	}
}

// timedCheckpoint runs the checkpoint of trajectory.every when one is due
// in e's session: its rules, and a drift check.
func (s *Server) timedCheckpoint(e *entry) {
	every := e.profile.CheckpointEvery()
	if every == 0 {
		return
	}
	e.mu.Lock()
	if e.session.lastAt.IsZero() {
		e.session.lastAt = e.claimed
	}
	now := s.opts.Now()
	if now.Sub(e.session.lastAt) < every {
		e.mu.Unlock()
		return
	}
	cps := e.session.checkpoint(e.profile, now)
	e.mu.Unlock()
	s.checkpointed(e, cps, true)
	s.recorded()
}

// reloadProfiles reads again the profile files that changed. Sandboxes
// waiting in a pool were built from the old profile: they are ended, and
// the pool refills from the new one, or stays empty while the new one
// cannot be used (a governance refusal, an error); claimed sandboxes run
// on (a profile with drift checks stops them itself).
func (s *Server) reloadProfiles() {
	for name, a := range s.opts.Config.Agents {
		changed, err := a.Reload()
		if !changed {
			continue
		}
		ev := audit.Event{Agent: name, Kind: audit.Decision, Type: "profile_reloaded"}
		if err != nil {
			s.logf("%v; no new sandboxes for it until it is fixed", err)
			ev.Type, ev.Data = "profile_refused", map[string]any{"profile": a.ProfileFile, "error": err.Error()}
		} else {
			p, _ := a.Current()
			for _, w := range a.Warnings {
				s.logf("agent %s: %s", name, w)
			}
			s.logf("agent %s: %s changed; the pool is rebuilt from it", name, a.ProfileFile)
			ev.Data = map[string]any{"profile": a.ProfileFile, "profile_sha256": p.Hash()}
		}
		s.event(ev)
		s.recorded()
		p := s.pools[name]
		p.drain("profile_changed")
		p.refill()
	}
}

// keepEnded is how long an ended sandbox can still be looked up.
const keepEnded = 10 * time.Minute
