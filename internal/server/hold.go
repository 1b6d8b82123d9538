package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// heldError is a step held for a person's approval.
type heldError struct {
	id, msg string
}

func (e *heldError) Error() string { return e.msg }

// heldFor is the approval request err is held for, "" when it is not a
// held step.
func heldFor(err error) string {
	var held *heldError
	if errors.As(err, &held) {
		return held.id
	}
	return ""
}

// failStep answers a step that could not start: its status, its error and
// the approval request it is held for.
func failStep(w http.ResponseWriter, err error) int {
	return reply(w, stepStatus(err), api.Error{Error: err.Error(), Approval: heldFor(err)})
}

// stepStatus is the HTTP status of a step that could not start: 423 for
// one held for approval, 410 for a sandbox that has ended meanwhile, 409
// otherwise.
func stepStatus(err error) int {
	var held *heldError
	var unrecorded *auditError
	switch {
	case errors.As(err, &held):
		return http.StatusLocked
	case errors.As(err, &unrecorded):
		return http.StatusInternalServerError
	case errors.Is(err, sandbox.ErrEnded):
		return http.StatusGone
	}
	return http.StatusConflict
}

// execWhat is what an approver sees of a command, and what its retry
// must match: the whole of it (argv, the environment's names and values,
// the directory, and its stdin's size, SHA-256 and beginning).
func execWhat(cmd sandbox.ExecOptions) func() (any, error) {
	return func() (any, error) {
		what := map[string]any{"args": cmd.Args, "dir": cmd.Dir, "env": envMap(cmd.Env)}
		switch in := cmd.Stdin.(type) {
		case nil:
		case *bytes.Reader: // as checkExec makes it
			d, err := describe(io.NewSectionReader(in, 0, in.Size()))
			if err != nil {
				return nil, fmt.Errorf("reading the command's stdin: %w", err)
			}
			what["stdin"] = d
		default:
			return nil, errors.New("the command's stdin cannot be shown to an approver")
		}
		return what, nil
	}
}

// maxPendingSteps bounds the approval requests one session has pending.
const maxPendingSteps = 16

// hold lets a step of a session that a trajectory rule holds for a person
// go on only once a person approved that very step: the first time, it
// files an approval request (the step, the rule, the session) and answers
// that the step is held; asked again after the approval, the step is
// claimed, once, and runs. A denial, an expiry or a store that cannot be
// read refuses it.
func (s *Server) hold(e *entry, c caller, cp *toolpolicy.Checkpoint, kind string, describe func() (any, error)) error {
	what, err := describe()
	if err != nil {
		return fmt.Errorf("the session of sandbox %s is held for a person, and %v; the step was not run", e.id, err)
	}
	args, err := json.Marshal(what)
	if err != nil {
		return fmt.Errorf("the session of sandbox %s is held for a person, and its step cannot be shown (%v); the step was not run", e.id, err)
	}
	st := s.opts.Approvals
	items, err := st.List()
	if err != nil {
		return fmt.Errorf("the session of sandbox %s is held for a person, and the approval store cannot be read (%v); the step was not run", e.id, err)
	}
	pending := 0
	for _, it := range items {
		if it.Session == e.id && it.State == approvals.Pending {
			pending++
		}
		if it.Session != e.id || it.Tool != kind || string(it.Args) != string(args) {
			continue
		}
		switch it.State {
		case approvals.Denied, approvals.Expired:
			// A person said no, or no one said yes in time: that very
			// step stays refused, and is not asked for again.
			return fmt.Errorf("the session of sandbox %s is held for a person, and this step's approval %s was %s (%s); it is not run, nor asked for again", e.id, it.ID, it.State, it.Why)
		case approvals.Approved:
			won, err := st.Claim(it.ID)
			if err != nil {
				return fmt.Errorf("claiming approval %s: %v; the step was not run", it.ID, err)
			}
			if won {
				st.Finish(it.ID, "run")
				s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "approved_step", Data: map[string]any{"id": it.ID, "by": it.By, "kind": kind}})
				return nil
			}
		case approvals.Pending:
			return &heldError{it.ID, fmt.Sprintf("held for a person: approval %s is pending (%s, at step %d: %s); send the same request again once it is approved", it.ID, cp.Rule, cp.Step, cp.Reason)}
		}
	}
	if pending >= maxPendingSteps {
		// An agent cannot bury one request among many.
		return fmt.Errorf("the session of sandbox %s is held for a person, and %d of its steps already wait for one; this step was not run, nor asked for (send it again once those are decided)", e.id, pending)
	}
	p := e.profile.ApprovalPolicy()
	now := time.Now() // the store's clock
	e.mu.Lock()
	step := e.session.steps + 1
	e.mu.Unlock()
	id, err := st.Add(approvals.Request{
		Expires: now.Add(p.TimeoutDuration()), Tool: kind, Args: args, Class: "trajectory", Reversible: true,
		Rule: cp.Rule, Reason: "the session is held for a person: at step " + fmt.Sprint(cp.Step) + ", " + cp.Rule + " held (" + cp.Reason + ")",
		// Not a gateway's call: no gateway's recovery loop may run it
		// (they take the requests whose hash is their profile's).
		Agent: e.agent.Name, Profile: e.agent.ProfileFile, ProfileHash: "cordon-serve-step:" + e.sha, Session: e.id, Step: step, Approvers: p.Approvers,
	})
	if err != nil {
		return fmt.Errorf("the session of sandbox %s is held for a person, and the request could not be filed (%v); the step was not run", e.id, err)
	}
	s.event(audit.Event{Sandbox: e.id, Agent: e.agent.Name, Kind: audit.Decision, Type: "approval_request", Data: map[string]any{"id": id, "kind": kind, "rule": cp.Rule, "token": c.name()}})
	s.recorded()
	return &heldError{id, fmt.Sprintf("held for a person: approval %s was requested (%s, at step %d: %s); send the same request again once it is approved", id, cp.Rule, cp.Step, cp.Reason)}
}
