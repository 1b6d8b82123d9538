package server

import (
	"fmt"
	"os"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// A sandbox of a guarded workspace (workspace.mode: guarded) writes to a
// layer on disk (STATE/layers/ID, see Boxes), never to the host's
// workspace, as a reviewed one does. After each command that may write
// (an exec, a file upload), once nothing of the sandbox runs (no command,
// and no process a command left behind: sandbox.Box.WhenIdle, during which
// commands wait), the server captures the layer, judges it as review
// mode does (against the host's tree and every set still held), and lands
// at once what the profile's review policy does not hold. What it holds,
// and what the host changed meanwhile (a conflict), stays the sandbox's
// change set, shown and applied as a reviewed sandbox's (see changes.go).
// Nothing lands while anything of the sandbox runs: what a command that
// left a process running wrote lands once none runs, or when the sandbox
// ends. The layer keeps what landed (an overlay's layers do not change
// under it), and the next capture is told what landed and how it was left
// (changes.Remember): a path only cordon changed is no conflict, and a
// file as it landed is not read again.

// landTries are the waits, after a command, between the looks for its
// sandbox idle: what a command's end killed is reaped within them.
var landTries = []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond}

// landEvery is how often a sandbox with changes waiting for it to be idle
// is looked at.
const landEvery = 250 * time.Millisecond

// pendingWhy says why what a command wrote has not landed yet.
const pendingWhy = "a process of the sandbox still runs: what was written lands once none does, or when the sandbox ends"

// landAfter lands what e's sandbox wrote, after a command of the token
// who: at once when nothing of the sandbox runs, else once nothing does.
// It returns what the command's outcome says of it; nil when the
// workspace is not guarded or nothing changed.
func (s *Server) landAfter(e *entry, who string) *outcome.Changes {
	rv := e.review
	if rv == nil || !rv.guarded {
		return nil
	}
	lb := e.box.(layered)
	var out *outcome.Changes
	for _, d := range landTries {
		time.Sleep(d)
		if e.box.Why() != "" {
			return nil // ended by a limit or drift: see keepFinal
		}
		if lb.WhenIdle(func(layer *os.File) { out = s.landLocking(e, layer, who) }) {
			return out
		}
		select {
		case <-e.box.Done():
			return nil // its final capture lands it (keepFinal)
		default:
		}
	}
	s.landLater(e, who)
	rv.mu.Lock()
	run := rv.run
	rv.mu.Unlock()
	if run == "" {
		run = e.id // the name its first capture takes
	}
	return &outcome.Changes{Set: run, Pending: pendingWhy}
}

// landLater lands e's changes once nothing of the sandbox runs, looking
// every landEvery until it has ended; one watcher per sandbox.
func (s *Server) landLater(e *entry, who string) {
	rv := e.review
	rv.mu.Lock()
	if rv.waiting || rv.ended {
		rv.mu.Unlock()
		return
	}
	rv.waiting = true
	rv.mu.Unlock()
	lb := e.box.(layered)
	go func() {
		t := time.NewTicker(landEvery)
		defer t.Stop()
		for {
			select {
			case <-e.box.Done():
				rv.mu.Lock()
				rv.waiting = false
				rv.mu.Unlock()
				return
			case <-t.C:
			}
			if e.box.Why() != "" {
				continue // ended by a limit or drift: Done comes
			}
			if lb.WhenIdle(func(layer *os.File) { s.landLocking(e, layer, who) }) {
				return
			}
		}
	}()
}

// landLocking is land, under the review's lock.
func (s *Server) landLocking(e *entry, layer *os.File, who string) *outcome.Changes {
	e.review.mu.Lock()
	defer e.review.mu.Unlock()
	return s.land(e, layer, who)
}

// land captures e's layer, which nothing writes (the sandbox is idle or
// has ended), and lands what the review policy does not hold; the rest
// stays as the sandbox's change set. Both are recorded: the landing before
// it is done, what landed after. The review's lock is held.
func (s *Server) land(e *entry, layer *os.File, who string) *outcome.Changes {
	rv := e.review
	// What waited lands now, with the rest: no watcher is needed until a
	// command leaves a process running again.
	rv.waiting = false
	dir := s.changesDir()
	set, err := s.capture(e, layer)
	if err != nil {
		s.logf("sandbox %s: landing its changes: %v", e.id, err)
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes_land", Data: map[string]any{"by": "guarded", "token": who, "error": err.Error()}})
		s.recorded()
		return &outcome.Changes{Set: rv.run, Error: err.Error() + " (nothing landed)"}
	}
	if len(set.Changes) == 0 || set.Digest == rv.held {
		// Nothing to land, nor to record again; what the capture found
		// alike on both sides is kept for the next.
		rv.landed = changes.Remember(set, &changes.Report{}, rv.landed)
		if len(set.Changes) == 0 {
			changes.Discard(dir, set.Run)
			return nil
		}
		return &outcome.Changes{Set: set.Run, Entries: len(set.Changes), Bytes: set.Bytes, Digest: set.Digest}
	}
	s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Action, Type: "changes_land",
		Data: map[string]any{"by": "guarded", "token": who, "set": set.Run, "digest": set.Digest, "entries": len(set.Changes), "bytes": set.Bytes}})
	if err := s.recordAction(); err != nil {
		// Nothing lands unrecorded: all of it waits, as the set kept.
		return &outcome.Changes{Set: set.Run, Entries: len(set.Changes), Bytes: set.Bytes, Digest: set.Digest,
			Error: fmt.Sprintf("the landing could not be recorded (%v): nothing landed", err)}
	}
	rep, rest, err := changes.Land(set, layer, dir, policyOf(e), changes.ApplyOptions{Owner: changes.WorkspaceOwner(set.Workspace)})
	if rep != nil {
		rv.landed = changes.Remember(set, rep, rv.landed)
		rec := changes.ApplyRecord(set, rep)
		rec["by"], rec["token"] = "guarded", who
		if rest != nil {
			rec["waiting"], rec["waiting_digest"] = len(rest.Changes), rest.Digest
		}
		if err != nil {
			rec["error"] = err.Error()
		}
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes_landed", Data: rec})
	}
	rerr := s.recorded()
	if err != nil {
		s.logf("sandbox %s: landing its changes: %v", e.id, err)
		out := &outcome.Changes{Set: set.Run, Error: err.Error()}
		if rep != nil {
			out.Landed, out.Conflicts = len(rep.Applied)+len(rep.Already), len(rep.Conflicts)
		}
		return out
	}
	out := &outcome.Changes{Set: set.Run, Entries: len(rest.Changes), Bytes: rest.Bytes, Landed: len(rep.Applied) + len(rep.Already), Conflicts: len(rep.Conflicts)}
	rv.held = ""
	if len(rest.Changes) > 0 {
		out.Digest, rv.held = rest.Digest, rest.Digest
	}
	if rerr != nil {
		out.Error = fmt.Sprintf("what landed could not be recorded: %v", rerr)
	}
	return out
}
