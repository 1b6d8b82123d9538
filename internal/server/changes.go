package server

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// A sandbox of a profile whose workspace is reviewed (workspace.mode:
// review) writes to a layer of its own, never to the host's workspace.
// Its changes are captured from that layer into the server's state
// directory (STATE/changes, which no sandbox sees) as the change set named
// by the sandbox's id: on request while it runs, and once more when it
// ends, so that cordon changes, apply and discard find them later. An
// admin (an approver of the profile) applies them; the agent that owns
// the sandbox only when the profile says review.agent_applies, and then
// the changes its review policy holds wait for an approval of their
// digest in the approval store.

// review is the change set of a sandbox of a reviewed workspace. Its lock
// runs one capture, apply or discard of the sandbox at a time, the capture
// made when the sandbox ends included.
type review struct {
	mu sync.Mutex
	// started is when the sandbox was claimed (the wall clock): a host
	// path changed since is a conflict.
	started time.Time
	// run names the latest capture ("" before the first); gen counts the
	// captures that took a new name because part of the one before had
	// been applied (what landed is in the audit log).
	run string
	gen int
	// ended: the sandbox has ended, and run holds its final changes.
	ended bool
	// guarded: what the sandbox writes lands after each command (see
	// guarded.go); waiting: a watcher lands it once nothing of the
	// sandbox runs.
	guarded, waiting bool
	// landed is what landed from the layer, for the next capture
	// (changes.Remember); held is the digest of what waited after the last
	// landing.
	landed map[string]changes.Landed
	held   string
}

// layered is what a sandbox of a reviewed workspace offers beyond Sandbox
// (ownedBox, over sandbox.Box).
type layered interface {
	// Layer is the root of its copy-on-write layer while it runs.
	Layer() *os.File
	// CloseWith is Close, calling kept with the layer once no process of
	// the sandbox runs.
	CloseWith(kept func(layer *os.File))
	// Workspace is the host directory its workspace is over, and whether
	// that is a private one, removed with it.
	Workspace() (dir string, private bool)
	// WhenIdle runs fn with the layer when nothing of the sandbox runs,
	// commands waiting meanwhile, and says whether it did.
	WhenIdle(fn func(layer *os.File)) bool
}

// reviewOf returns the review of a sandbox built from p, nil when its
// workspace is not reviewed.
func reviewOf(p *profile.Profile, box Sandbox) *review {
	if !p.Workspace.Reviewed() {
		return nil
	}
	if _, ok := box.(layered); !ok {
		return nil
	}
	return &review{guarded: p.Workspace.Guarded(), landed: map[string]changes.Landed{}}
}

// start marks the claim of the sandbox.
func (rv *review) start() {
	if rv == nil {
		return
	}
	rv.mu.Lock()
	rv.started = time.Now()
	rv.mu.Unlock()
}

func (s *Server) changeRoutes() {
	s.handle("GET "+api.Version+"/sandboxes/{id}/changes", anyToken, s.changesGet)
	s.handle("GET "+api.Version+"/sandboxes/{id}/changes/diff", anyToken, s.changesDiff)
	s.handle("POST "+api.Version+"/sandboxes/{id}/apply", anyToken, s.changesApply)
	s.handle("POST "+api.Version+"/sandboxes/{id}/discard", anyToken, s.changesDiscard)
}

// changesDir is where the server keeps change sets.
func (s *Server) changesDir() string { return filepath.Join(s.opts.StateDir, "changes") }

// untouched says whether a pre-warmed sandbox of a reviewed workspace
// still has an empty layer, as it must when it is claimed: nothing written
// before its claim may reach its change set. One that has not is ended.
func (s *Server) untouched(e *entry) bool {
	if e.review == nil {
		return true
	}
	empty, err := layerEmpty(e.box.(layered).Layer())
	if err == nil && empty {
		return true
	}
	s.logf("sandbox %s: its layer is not empty before its claim (%v): ended", e.id, err)
	s.end(e, "layer_not_empty")
	return false
}

// layerEmpty says whether the upper directory of layer holds nothing.
func layerEmpty(layer *os.File) (bool, error) {
	if layer == nil {
		return false, errors.New("no layer")
	}
	fd, err := unix.Openat(int(layer.Fd()), "upper", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("opening the layer's upper directory: %w", err)
	}
	d := os.NewFile(uintptr(fd), "upper")
	defer d.Close()
	names, err := d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// closeBox ends e's sandbox; one of a reviewed workspace that was claimed
// keeps its final changes first (see keepFinal).
func (s *Server) closeBox(e *entry) {
	e.mu.Lock()
	claimed := !e.claimed.IsZero()
	e.mu.Unlock()
	lb, ok := e.box.(layered)
	if e.review == nil || !ok || !claimed {
		e.box.Close()
	} else {
		lb.CloseWith(func(layer *os.File) { s.keepFinal(e, layer) })
	}
	if e.review != nil {
		e.review.mu.Lock()
		e.review.ended = true
		e.review.mu.Unlock()
	}
}

// keepFinal captures the layer of a sandbox that has ended (no process of
// it runs) as its final change set, and records it.
func (s *Server) keepFinal(e *entry, layer *os.File) {
	rv := e.review
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.ended = true
	ev := audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes"}
	_, private := e.box.(layered).Workspace()
	switch {
	case private:
		// Its workspace is removed with it: there is nothing to apply
		// its changes to.
		ev.Data = map[string]any{"kept": false, "why": "the sandbox's workspace is its own, removed with it"}
	case s.opts.StateDir == "":
		ev.Data = map[string]any{"kept": false, "why": "the server keeps no state directory"}
	case rv.guarded && strings.HasPrefix(e.box.Why(), "workspace_"):
		// A guarded workspace lands what it holds: not what a sandbox
		// ended past its limit left.
		ev.Data = map[string]any{"kept": false, "why": "the sandbox was ended past its " + e.box.Why() + " limit: nothing of it lands"}
	case rv.guarded:
		// What is left lands now, as after a command; what is held is
		// kept.
		out := s.land(e, layer, "")
		data := map[string]any{"kept": out != nil && out.Entries > 0}
		if out != nil {
			data["landed"] = out.Landed
			if out.Entries > 0 {
				data["set"], data["digest"], data["entries"] = out.Set, out.Digest, out.Entries
			}
			if out.Error != "" {
				data["error"] = out.Error
			}
		}
		ev.Data = data
	default:
		set, err := s.capture(e, layer)
		if err != nil {
			s.logf("sandbox %s: keeping its changes: %v", e.id, err)
			ev.Data = map[string]any{"kept": false, "error": err.Error()}
		} else if len(set.Changes) == 0 {
			// Nothing to review: no empty set is left behind for every
			// sandbox that wrote nothing.
			changes.Discard(s.changesDir(), set.Run)
			ev.Data = map[string]any{"kept": false, "set": set.Run, "entries": 0, "why": "no changes"}
		} else {
			ev.Data = map[string]any{"kept": true, "set": set.Run, "digest": set.Digest, "entries": len(set.Changes), "bytes": set.Bytes}
		}
	}
	s.event(ev)
}

// capture captures e's layer as its latest change set, with the profile's
// review policy beside it; rv.mu is held. The capture before is replaced:
// the layer holds all it held that has not landed. When part of it landed,
// this one takes a new name, so that nothing decided about the one before
// (an approval, a digest) is taken for this one; one set per sandbox is
// kept either way.
func (s *Server) capture(e *entry, layer *os.File) (*changes.Set, error) {
	rv, dir := e.review, s.changesDir()
	run := rv.run
	if run == "" {
		run = e.id
	} else if set, err := changes.Load(dir, run); err == nil && len(set.Applied) > 0 {
		if err := changes.Discard(dir, run); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		rv.gen++
		run = fmt.Sprintf("%s-%d", e.id, rv.gen+1)
	}
	rv.run = run
	if err := changes.Discard(dir, run); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ws, _ := e.box.(layered).Workspace()
	lim := captureLimits(e.profile)
	lim.Landed = rv.landed
	set, err := changes.Capture(layer, ws, dir, run, rv.started, lim)
	if err != nil {
		changes.Discard(dir, run)
		return nil, fmt.Errorf("capturing the changes of sandbox %s: %w", e.id, err)
	}
	if err := changes.WriteReview(dir, run, policyOf(e)); err != nil {
		changes.Discard(dir, run)
		return nil, err
	}
	return set, nil
}

// captureLimits bound a capture of p's layer as the layer itself is
// bounded (a few entries more: the layer's own directories).
func captureLimits(p *profile.Profile) changes.Limits {
	size, inodes := p.Resources.WorkspaceSize.N, p.Resources.WorkspaceInodes.N
	if size <= 0 {
		size = 1 << 30
	}
	if inodes <= 0 {
		inodes = 100000
	}
	return changes.Limits{MaxEntries: int(inodes) + 16, MaxBytes: size}
}

// policyOf is the review record of e's change sets, kept beside each as
// cordon run keeps it, for cordon apply as much as for this server.
func policyOf(e *entry) changes.Review {
	rv := changes.ReviewOf(e.profile, e.agent.ProfileFile, e.sha)
	rv.Agent = e.agent.Name
	return rv
}

// changesAnswer is the answer of GET .../changes.
type changesAnswer struct {
	Sandbox string `json:"sandbox"`
	// Final: the sandbox has ended, and these are its last changes.
	Final bool         `json:"final"`
	Set   *changes.Set `json:"set"`
	// NeedsApproval are the changes the profile's review policy holds
	// (the first maxHeldListed), NeedsApprovalTotal how many in all.
	NeedsApproval      []changes.Held `json:"needs_approval"`
	NeedsApprovalTotal int            `json:"needs_approval_total"`
	AgentApplies       bool           `json:"agent_applies"`
	// Git is what the set does to its repositories, read from its objects.
	Git *changes.GitActivity `json:"git,omitempty"`
}

// reviewed is lookup for a sandbox of a reviewed workspace, on a server
// that can keep its changes.
func (s *Server) reviewed(w http.ResponseWriter, r *http.Request, c caller) (*entry, int) {
	e, status := s.lookup(w, r, c)
	if e == nil {
		return nil, status
	}
	if e.review == nil {
		return nil, fail(w, http.StatusConflict, "sandbox %s does not review its workspace (its profile's workspace.mode is not review): its writes are on the host already", e.id)
	}
	if s.opts.StateDir == "" {
		return nil, fail(w, http.StatusNotFound, "this server keeps no state directory, and so no change sets")
	}
	return e, 0
}

// latest captures e's layer while the sandbox runs, or loads its final
// change set once it has ended; rv.mu is held. The capture is recorded.
func (s *Server) latest(e *entry, c caller) (*changes.Set, int, error) {
	rv := e.review
	if rv.ended {
		if rv.run == "" {
			return nil, http.StatusNotFound, fmt.Errorf("sandbox %s has ended, and no change set of it was kept", e.id)
		}
		set, err := changes.Load(s.changesDir(), rv.run)
		if err != nil {
			return nil, http.StatusNotFound, fmt.Errorf("sandbox %s has ended, and left no changes to review (or they were discarded)", e.id)
		}
		return set, 0, nil
	}
	set, err := s.capture(e, e.box.(layered).Layer())
	if err != nil {
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes_capture", Data: map[string]any{"token": c.name(), "error": err.Error()}})
		s.recorded()
		return nil, http.StatusInternalServerError, err
	}
	s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes_capture",
		Data: map[string]any{"token": c.name(), "set": set.Run, "digest": set.Digest, "entries": len(set.Changes), "bytes": set.Bytes}})
	if err := s.recorded(); err != nil {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("the capture could not be recorded (%v): send it again once the audit log can be written", err)
	}
	return set, 0, nil
}

func (s *Server) changesGet(w http.ResponseWriter, r *http.Request, c caller) int {
	if r.URL.Query().Get("diff") != "" {
		return s.changesDiff(w, r, c)
	}
	e, status := s.reviewed(w, r, c)
	if e == nil {
		return status
	}
	e.review.mu.Lock()
	set, status, err := s.latest(e, c)
	final := e.review.ended
	e.review.mu.Unlock()
	if err != nil {
		return fail(w, status, "%v", err)
	}
	hold, n := policyOf(e).Held(set.Changes)
	return reply(w, http.StatusOK, changesAnswer{Sandbox: e.id, Final: final, Set: set, NeedsApproval: hold, NeedsApprovalTotal: n,
		AgentApplies: e.profile.ReviewPolicy().AgentApplies, Git: changes.Git(set, s.changesDir())})
}

// maxDiff bounds the diff an answer holds; past it, the diff is cut and
// says so.
const maxDiff = 4 << 20

// maxQueryPaths bounds the paths a diff request names.
const maxQueryPaths = 1000

// changesDiff answers the unified diff of the latest change set: of the
// capture whose digest the request names, or of a capture made now.
func (s *Server) changesDiff(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.reviewed(w, r, c)
	if e == nil {
		return status
	}
	if !c.token.Admin {
		// The old side is read on the host with the server's rights: a
		// file the sandbox user could not read (then deleted from inside)
		// would be shown to the agent.
		return fail(w, http.StatusForbidden, "the diff shows the host's files as they are: an admin reads it")
	}
	q := r.URL.Query()
	paths := q["path"]
	if len(paths) > maxQueryPaths {
		return fail(w, http.StatusBadRequest, "path: at most %d paths", maxQueryPaths)
	}
	digest := q.Get("digest")
	if digest != "" && !validDigest(digest) {
		return fail(w, http.StatusBadRequest, "digest: want the 64 hex digits of a change set's digest, found %q", digest)
	}
	rv := e.review
	rv.mu.Lock()
	defer rv.mu.Unlock()
	var set *changes.Set
	var err error
	if digest != "" {
		if set, status, err = s.captured(e, digest); err != nil {
			return fail(w, status, "%v", err)
		}
	} else if set, status, err = s.latest(e, c); err != nil {
		return fail(w, status, "%v", err)
	}
	out := &cappedBuffer{max: maxDiff}
	if err := changes.Diff(out, set, s.changesDir(), paths); err != nil {
		return fail(w, http.StatusBadRequest, "%v", err)
	}
	if out.over {
		fmt.Fprintf(&out.Buffer, "\n[the diff is cut at %d bytes: cordon changes %s --diff shows it whole]\n", maxDiff, set.Run)
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cordon-Change-Set", set.Run)
	h.Set("Cordon-Digest", set.Digest)
	w.WriteHeader(http.StatusOK)
	w.Write(out.Bytes())
	return http.StatusOK
}

func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	_, err := hex.DecodeString(d)
	return err == nil && strings.ToLower(d) == d
}

// captured loads the latest change set of e, which must have digest;
// rv.mu is held.
func (s *Server) captured(e *entry, digest string) (*changes.Set, int, error) {
	rv := e.review
	if rv.run == "" {
		return nil, http.StatusConflict, fmt.Errorf("sandbox %s has no captured changes: review them first (GET %s/sandboxes/%s/changes)", e.id, api.Version, e.id)
	}
	set, err := changes.Load(s.changesDir(), rv.run)
	if err != nil {
		return nil, http.StatusConflict, fmt.Errorf("%v: review the changes again (GET %s/sandboxes/%s/changes)", err, api.Version, e.id)
	}
	if set.Digest != digest {
		return nil, http.StatusConflict, fmt.Errorf("the latest capture of sandbox %s (%s) has digest %s, not %s: review it again (GET %s/sandboxes/%s/changes)", e.id, set.Run, set.Digest, digest, api.Version, e.id)
	}
	return set, 0, nil
}

// ApplyRequest is the body of POST .../apply.
type ApplyRequest struct {
	// Digest is the digest of the change set that was reviewed: only that
	// very set is applied.
	Digest string `json:"digest"`
	// Paths select changes (exact paths, or directories holding some);
	// none: all of them.
	Paths []string `json:"paths,omitempty"`
}

// applyAnswer is the answer of an apply: what landed, what was there
// already, what was refused (special files), and the conflicts left alone.
type applyAnswer struct {
	Sandbox   string             `json:"sandbox"`
	Set       string             `json:"set"`
	Digest    string             `json:"digest"`
	Applied   []string           `json:"applied"`
	Already   []string           `json:"already"`
	Refused   []string           `json:"refused"`
	Conflicts []changes.Conflict `json:"conflicts"`
}

// heldAnswer is the answer of an apply held for a person's approval.
type heldAnswer struct {
	Approval  string         `json:"approval"`
	State     string         `json:"state"`
	Set       string         `json:"set"`
	Digest    string         `json:"digest"`
	Held      []changes.Held `json:"held"`
	HeldTotal int            `json:"held_total"`
	Message   string         `json:"message"`
}

// maxApplyBody bounds an apply's body.
const maxApplyBody = 1 << 20

func (s *Server) changesApply(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.reviewed(w, r, c)
	if e == nil {
		return status
	}
	var req ApplyRequest
	if err := decode(r, w, maxApplyBody, &req); err != nil {
		return fail(w, bodyStatus(err), "%v", err)
	}
	if !validDigest(req.Digest) {
		return fail(w, http.StatusBadRequest, "digest: want the 64 hex digits of the digest of the change set that was reviewed, found %q", req.Digest)
	}
	if status := s.mayApply(w, e, c, "apply"); status != 0 {
		return status
	}
	rv := e.review
	rv.mu.Lock()
	defer rv.mu.Unlock()
	set, status, err := s.captured(e, req.Digest)
	if err != nil {
		return fail(w, status, "%v", err)
	}
	sel, err := set.Select(req.Paths)
	if err != nil {
		return fail(w, http.StatusBadRequest, "paths: %v", err)
	}
	approval := ""
	if !c.token.Admin {
		// The agent applies its own changes: those its profile's review
		// policy holds need a person's approval of this very digest.
		// Whether approval is needed depends on what is applied; what a
		// request shows, and an approval covers, is every held change of
		// the set, so that approving a part never approves the rest.
		rv := policyOf(e)
		if _, need := rv.Held(sel); need > 0 {
			hold, n := rv.Held(set.Changes)
			it, status, err := s.changeApproval(e, c, set, hold, n)
			if err != nil {
				return fail(w, status, "%v", err)
			}
			if !approved(it.State) {
				return reply(w, http.StatusAccepted, heldAnswer{Approval: it.ID, State: it.State, Set: set.Run, Digest: set.Digest, Held: hold, HeldTotal: n,
					Message: fmt.Sprintf("%d change(s) need a person's approval (request %s is pending); nothing was applied: send the same request again once it is approved", n, it.ID)})
			}
			approval = it.ID
		}
	}
	// The apply is written before it is done: nothing lands unrecorded.
	s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Action, Type: "changes_apply",
		Data: map[string]any{"token": c.name(), "set": set.Run, "digest": set.Digest, "paths": changes.BoundedPaths(req.Paths), "approval": approval}})
	if err := s.recordAction(); err != nil {
		return unrecorded(w, "the apply", err)
	}
	rep, err := changes.Apply(set, s.changesDir(), req.Paths, changes.ApplyOptions{Owner: changes.WorkspaceOwner(set.Workspace)})
	if rep != nil {
		rv.landed = changes.Remember(set, rep, rv.landed)
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes_applied", Data: applyRecord(set, rep, c.name())})
	} else if err != nil {
		s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "changes_applied", Data: map[string]any{"token": c.name(), "set": set.Run, "digest": set.Digest, "error": err.Error()}})
	}
	rerr := s.recorded()
	if err != nil {
		return fail(w, http.StatusInternalServerError, "applying change set %s: %v", set.Run, err)
	}
	if rerr != nil {
		return fail(w, http.StatusInternalServerError, "change set %s was applied, but what landed could not be recorded: %v", set.Run, rerr)
	}
	out := applyAnswer{Sandbox: e.id, Set: set.Run, Digest: set.Digest, Applied: orEmpty(rep.Applied), Already: orEmpty(rep.Already),
		Refused: orEmpty(rep.Refused), Conflicts: rep.Conflicts}
	if out.Conflicts == nil {
		out.Conflicts = []changes.Conflict{}
	}
	if len(rep.Conflicts) > 0 {
		return reply(w, http.StatusConflict, out)
	}
	return reply(w, http.StatusOK, out)
}

// mayApply checks that c may apply (or discard) e's changes: an admin
// token that the profile's approvers, when it names some, include; the
// agent that owns the sandbox when the profile lets it apply its own.
func (s *Server) mayApply(w http.ResponseWriter, e *entry, c caller, what string) int {
	if c.token.Admin {
		if !e.profile.ApprovalPolicy().IsApprover(c.token.Name) {
			return fail(w, http.StatusForbidden, "%s is not an approver of the profile of sandbox %s (approval.approvers): it cannot %s its changes", c.token.Name, e.id, what)
		}
		return 0
	}
	if what == "apply" && !e.profile.ReviewPolicy().AgentApplies {
		s.metrics.denial(c.token.Agent, "review.agent_applies")
		return fail(w, http.StatusForbidden, "an agent does not apply its own changes unless its profile says review.agent_applies: an admin or approver applies them")
	}
	return 0
}

// maxPendingApplies bounds the approval requests of one sandbox's change
// sets that wait at once.
const maxPendingApplies = 16

// changeApproval finds the approval request for the held changes of set
// (the same digest), filing one when there is none, as cordon apply does.
func (s *Server) changeApproval(e *entry, c caller, set *changes.Set, hold []changes.Held, n int) (approvals.Item, int, error) {
	st := s.opts.Approvals
	if st == nil {
		return approvals.Item{}, http.StatusForbidden, fmt.Errorf("%d change(s) need a person's approval, and this server keeps no approval store: an admin applies them", n)
	}
	items, err := st.List()
	if err != nil {
		return approvals.Item{}, http.StatusInternalServerError, fmt.Errorf("reading the approval store: %v; nothing was applied", err)
	}
	pending := 0
	var found *approvals.Item
	for i := range items {
		it := &items[i]
		if it.Tool != changes.ApplyTool || !strings.HasPrefix(it.Session, e.id) {
			continue
		}
		if it.State == approvals.Pending {
			pending++
		}
		if it.Session == set.Run && changes.ApprovalDigest(it.Args) == set.Digest && it.State != approvals.Expired {
			found = it
		}
	}
	if found != nil {
		if found.State == approvals.Denied {
			return *found, http.StatusForbidden, fmt.Errorf("the changes of %s that need approval were denied by %s (request %s: %s); nothing was applied: apply the rest by naming their paths", set.Run, found.By, found.ID, found.Why)
		}
		return *found, 0, nil
	}
	if pending >= maxPendingApplies {
		return approvals.Item{}, http.StatusTooManyRequests, fmt.Errorf("%d approval requests of sandbox %s wait already; nothing was applied, nor asked for (send it again once those are decided)", pending, e.id)
	}
	now := time.Now() // the store's clock
	id, err := st.Add(approvals.Request{
		Expires: now.Add(changes.ApprovalTimeout), Tool: changes.ApplyTool, Args: changes.ApprovalArgs(set, hold, n), Class: "changes",
		Rule:   changes.HeldRules(hold),
		Reason: fmt.Sprintf("%d change(s) of a reviewed workspace need approval before they land on %s (GET %s/sandboxes/%s/changes/diff?digest=%s shows them)", n, set.Workspace, api.Version, e.id, set.Digest),
		// Not a gateway's call: no gateway's recovery loop may take it
		// (they take the requests whose hash is their profile's).
		Agent: e.agent.Name, Profile: e.agent.ProfileFile, ProfileHash: "cordon-serve-apply:" + e.sha, Session: set.Run, Approvers: e.profile.ApprovalPolicy().Approvers,
	})
	if err != nil {
		return approvals.Item{}, http.StatusInternalServerError, fmt.Errorf("filing the approval request: %v; nothing was applied", err)
	}
	s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "approval_request",
		Data: map[string]any{"id": id, "kind": changes.ApplyTool, "set": set.Run, "digest": set.Digest, "held": n, "token": c.name()}})
	s.recorded()
	it, err := st.Get(id)
	if err != nil {
		return it, http.StatusInternalServerError, err
	}
	return it, 0, nil
}

// approved says whether a request in state was approved (and perhaps
// claimed since: the approval still covers its digest).
func approved(state string) bool {
	return state == approvals.Approved || state == approvals.Running || state == approvals.Done
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// applyRecord is the audit record of an apply: what landed, and by whose
// token.
func applyRecord(set *changes.Set, rep *changes.Report, by string) map[string]any {
	rec := changes.ApplyRecord(set, rep)
	rec["token"] = by
	return rec
}

// discardAnswer is the answer of a discard.
type discardAnswer struct {
	Sandbox string `json:"sandbox"`
	Set     string `json:"set"`
	Digest  string `json:"digest"`
	Changes int    `json:"changes"`
}

// changesDiscard drops the latest change set of a sandbox (its layer, while
// it runs, stays as it is: the next capture reads it again).
func (s *Server) changesDiscard(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.reviewed(w, r, c)
	if e == nil {
		return status
	}
	if status := s.mayApply(w, e, c, "discard"); status != 0 {
		return status
	}
	rv := e.review
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.run == "" {
		return fail(w, http.StatusNotFound, "sandbox %s has no captured changes", e.id)
	}
	set, err := changes.Load(s.changesDir(), rv.run)
	if err != nil {
		return fail(w, http.StatusNotFound, "%v", err)
	}
	s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Action, Type: "changes_discard",
		Data: map[string]any{"token": c.name(), "set": set.Run, "digest": set.Digest, "changes": len(set.Changes), "applied_before": len(set.Applied)}})
	if err := s.recordAction(); err != nil {
		return unrecorded(w, "the discard", err)
	}
	if err := changes.Discard(s.changesDir(), set.Run); err != nil {
		return fail(w, http.StatusInternalServerError, "%v", err)
	}
	return reply(w, http.StatusOK, discardAnswer{Sandbox: e.id, Set: set.Run, Digest: set.Digest, Changes: len(set.Changes)})
}
