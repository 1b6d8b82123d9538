package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

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

// stepStatus is the HTTP status of a step that could not start: 423 for
// one held for approval, 409 otherwise.
func stepStatus(err error) int {
	var held *heldError
	var unrecorded *auditError
	switch {
	case errors.As(err, &held):
		return http.StatusLocked
	case errors.As(err, &unrecorded):
		return http.StatusInternalServerError
	}
	return http.StatusConflict
}

// execWhat is what an approver sees of a command.
func execWhat(cmd sandbox.ExecOptions) any {
	return map[string]any{"args": cmd.Args, "dir": cmd.Dir, "env": cmd.Env}
}

// hold lets a step of a session that a trajectory rule holds for a person
// go on only once a person approved that very step: the first time, it
// files an approval request (the step, the rule, the session) and answers
// that the step is held; asked again after the approval, the step is
// claimed, once, and runs. A denial, an expiry or a store that cannot be
// read refuses it.
func (s *Server) hold(e *entry, c caller, cp *toolpolicy.Checkpoint, kind string, what any) error {
	args, err := json.Marshal(what)
	if err != nil {
		return err
	}
	st := s.opts.Approvals
	items, err := st.List()
	if err != nil {
		return fmt.Errorf("the session of sandbox %s is held for a person, and the approval store cannot be read (%v); the step was not run", e.id, err)
	}
	for _, it := range items {
		if it.Session != e.id || it.Tool != kind || string(it.Args) != string(args) {
			continue
		}
		switch it.State {
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
