package toolpolicy

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Checkpoint is a trajectory rule that held at a checkpoint.
type Checkpoint struct {
	Step   int    `json:"step"`
	Rule   string `json:"rule"` // "trajectory.rules.NAME" or "trajectory.probing"
	Action string `json:"action"`
	Reason string `json:"reason"`
}

// counters are what trajectory rules see of the session.
type counters struct {
	bytesOut     int64
	bytesIn      int64
	deletes      int
	approvalsNo  int
	hosts        map[string]bool
	filesRead    map[string]bool
	filesWritten map[string]bool
	denials      int
	approvals    int
	refused      window[bool] // per decision; the last refusedKept are read
}

const refusedKept = 1000

// count updates the counters with a decided call.
func (s *Session) count(c Call, d Decision) {
	k := &s.counters
	if k.hosts == nil {
		k.hosts, k.filesRead, k.filesWritten = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	refused := !d.Allow && !d.Approval
	k.refused.push(refused, refusedKept)
	switch {
	case refused:
		k.denials++
		return
	case d.Approval:
		k.approvals++
		return
	}
	if !hasRules(s.p) {
		// What follows only trajectory rules read.
		return
	}
	t := s.p.Tools[c.Tool]
	if t.Deletes {
		k.deletes++
	}
	if profile.Outward(t.Class) {
		b, _ := json.Marshal(c.Args)
		k.bytesOut += int64(len(b))
	}
	if u, ok := c.Args["url"].(string); ok {
		if pu, err := url.Parse(u); err == nil && pu.Host != "" {
			k.hosts[pu.Hostname()] = true
		}
	}
	if path, ok := c.Args["path"].(string); ok {
		switch t.Class {
		case "read":
			k.filesRead[path] = true
		case "write":
			k.filesWritten[path] = true
		}
	}
}

// vars is the session as trajectory rules see it.
func (s *Session) vars() map[string]any {
	k := &s.counters
	tools := map[string]any{}
	for name, n := range s.perTool {
		tools[name] = int64(n)
	}
	labels := []any{}
	for _, l := range s.Labels() {
		labels = append(labels, l)
	}
	last := k.refused.last(refusedKept)
	refused := make([]any, len(last))
	for i, r := range last {
		refused[i] = r
	}
	return map[string]any{
		"steps": int64(s.steps), "calls": int64(s.calls), "tools": tools,
		"bytes_out": k.bytesOut, "bytes_in": k.bytesIn, "deletes": int64(k.deletes), "hosts": int64(len(k.hosts)),
		"files_read": int64(len(k.filesRead)), "files_written": int64(len(k.filesWritten)),
		"labels": labels, "denials": int64(k.denials), "approvals": int64(k.approvals), "approvals_refused": int64(k.approvalsNo),
		"refused": refused,
	}
}

// hasRules reports whether p has trajectory rules: the counters and
// variables only they read are kept and made only then.
func hasRules(p *profile.Profile) bool {
	return p.Trajectory != nil && len(p.Trajectory.Rules) > 0
}

// ruleVars is the session as trajectory rules see it, nil without rules.
func (s *Session) ruleVars() map[string]any {
	if !hasRules(s.p) {
		return nil
	}
	return s.vars()
}

// checkpoint evaluates the trajectory rules when a checkpoint is due.
func (s *Session) checkpoint() {
	if s.tripped != nil {
		return
	}
	if !Due(s.p, s.steps) {
		return
	}
	s.lastAt = s.now()
	s.apply(Evaluate(s.p, s.steps, s.ruleVars(), s.counters.refused.last(refusedKept)))
}

// apply keeps the rules that held at a checkpoint, and trips the session
// on the first stop or approve rule.
func (s *Session) apply(cps []Checkpoint) {
	for _, cp := range cps {
		s.checkpoints = append(s.checkpoints, cp)
		if cp.Action != "warn" && s.tripped == nil {
			c := cp
			s.tripped = &c
		}
	}
}

// Due reports whether a checkpoint is due at step: every
// trajectory.every_steps steps.
func Due(p *profile.Profile, step int) bool {
	every := 1
	if t := p.Trajectory; t != nil && t.EverySteps > 0 {
		every = t.EverySteps
	}
	return step%every == 0
}

// Tick runs the checkpoint of trajectory.every when it is due: the last
// checkpoint, of steps or of time, is that old. It reports whether it ran;
// what held is taken with TakeCheckpoints, and a stop or approve rule
// applies to the session's later calls as at a checkpoint of steps.
func (s *Session) Tick() bool {
	every := s.p.CheckpointEvery()
	if every == 0 || s.tripped != nil {
		return false
	}
	last := s.lastAt
	if last.IsZero() {
		last = s.start
	}
	if s.now().Sub(last) < every {
		return false
	}
	s.lastAt = s.now()
	s.apply(Evaluate(s.p, s.steps, s.ruleVars(), s.counters.refused.last(refusedKept)))
	return true
}

// Evaluate evaluates p's trajectory rules at a checkpoint and returns those
// that held. session is what the rules see as `session`; refused says, for
// each of the last decisions, whether it was refused (the probing rule).
// A rule that cannot be evaluated holds: fail closed.
func Evaluate(p *profile.Profile, step int, session map[string]any, refused []bool) []Checkpoint {
	t := p.Trajectory
	var out []Checkpoint
	if t != nil && len(t.Rules) > 0 {
		vars := map[string]any{"session": session}
		for _, r := range t.Rules {
			v, err := r.Program().EvalVars(vars)
			if err != nil {
				out = append(out, Checkpoint{Step: step, Rule: "trajectory.rules." + r.Name, Action: r.Action, Reason: fmt.Sprintf("%s could not be evaluated (%v)", r.When, err)})
				continue
			}
			if v == true {
				out = append(out, Checkpoint{Step: step, Rule: "trajectory.rules." + r.Name, Action: r.Action, Reason: r.When})
			}
		}
	}
	pr := p.ProbingRule()
	last := refused
	if len(last) > pr.Window {
		last = last[len(last)-pr.Window:]
	}
	n := 0
	for _, r := range last {
		if r {
			n++
		}
	}
	if n >= pr.Denials {
		out = append(out, Checkpoint{Step: step, Rule: "trajectory.probing", Action: pr.Action, Reason: fmt.Sprintf("%d of the last %d calls were refused: the agent is probing its boundary", n, len(last))})
	}
	return out
}

// RefusedBefore counts a call refused before it could be decided (its
// arguments could not be decoded, or its paths resolved) as a step that
// was refused: toward the probing rule, and, when the same call is
// refused again and again, toward session.repeats.
func (s *Session) RefusedBefore(c Call) {
	s.steps++
	s.noted(c, Decision{Rule: "arguments"})
	s.failed(c)
}

// Overturned counts the allowed call decided last as refused for the
// probing rule: it was refused when it came to run (a path it named
// changed; see the gateway). Record counts it toward session.repeats.
func (s *Session) Overturned() {
	k := &s.counters
	k.denials++
	for i := len(k.refused.buf) - 1; i >= 0; i-- {
		if !k.refused.buf[i] {
			k.refused.buf[i] = true
			break
		}
	}
	s.checkpoint()
}

// Received counts the bytes of a result shown to the agent
// (session.bytes_in).
func (s *Session) Received(n int) { s.counters.bytesIn += int64(n) }

// ApprovalRefused counts a held call that was not approved (denied, not
// decided in time): session.approvals_refused.
func (s *Session) ApprovalRefused() { s.counters.approvalsNo++ }

// TakeCheckpoints returns the rules that held since the last call.
func (s *Session) TakeCheckpoints() []Checkpoint {
	out := s.checkpoints
	s.checkpoints = nil
	return out
}

// afterTrip applies a stop or approve rule that held to a later call.
func (s *Session) afterTrip(d Decision) Decision {
	cp := s.tripped
	if cp == nil {
		return d
	}
	why := fmt.Sprintf("at step %d, %s held (%s)", cp.Step, cp.Rule, cp.Reason)
	if cp.Action == "stop" {
		return Decision{Rule: cp.Rule, Limit: "trajectory", Reason: "the session was stopped: " + why}
	}
	if d.Allow {
		return Decision{Rule: cp.Rule, Reason: "the session is held for a person: " + why, Approval: true}
	}
	return d
}
