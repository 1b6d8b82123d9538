package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// hold asks a person to approve a call, and returns its request once it is
// approved and claimed to run (or, for the client's user, once it is
// stored), or the refusal the agent gets.
// Whatever fails on the way (the store, the client, the wait), the call is
// not made and the agent is told why.
func (g *Gateway) hold(ctx context.Context, r *mcp.CallToolRequest, s *session, c toolpolicy.Call, raw json.RawMessage, step int, d toolpolicy.Decision) (approvals.Request, *mcp.CallToolResult) {
	p := g.cfg.Profile
	ap := p.ApprovalPolicy()
	class := p.Tools[c.Tool].Class
	s.mu.Lock()
	labels := append([]string{}, s.policy.Labels()...)
	recent := []approvals.Recent{}
	for _, e := range s.policy.History() {
		if e.Step != step {
			recent = append(recent, approvals.Recent{Step: e.Step, Call: e.Call, Allow: e.Allow, Held: e.Held, Rule: e.Rule})
		}
	}
	s.mu.Unlock()
	req := approvals.Request{
		Expires: time.Now().Add(ap.TimeoutDuration()).UTC(),
		Tool:    c.Tool, Args: raw, Class: class,
		Reversible: !slices.Contains(profile.DefaultApprovalClasses, class),
		Rule:       d.Rule, Reason: d.Reason,
		Labels: labels, Recent: recent,
		Agent: p.Agent, Profile: g.cfg.ProfileFile, ProfileHash: g.hash, Session: s.id, Step: step,
		Approvers: ap.Approvers,
		Files:     approvalFiles(c.Files),
	}
	refuse := func(format string, args ...any) (approvals.Request, *mcp.CallToolResult) {
		why := fmt.Sprintf(format, args...)
		s.mu.Lock()
		s.policy.ApprovalRefused()
		s.mu.Unlock()
		g.record(s, audit.Event{Kind: audit.Decision, Type: "approval_outcome", Data: map[string]any{"tool": c.Tool, "step": step, "session": s.id, "executed": false, "reason": why}})
		return req, refusal(toolpolicy.Decision{Rule: d.Rule, Reason: why + "; the call was not made"})
	}
	if g.cfg.Approvals == nil {
		return refuse("%s needs approval (%s) and this gateway has no approval store", c.Tool, d.Rule)
	}
	var caps *mcp.ClientCapabilities
	if r.Session != nil {
		if ip := r.Session.InitializeParams(); ip != nil {
			caps = ip.Capabilities
		}
	}
	if ap.Via == "elicitation" && (caps == nil || caps.Elicitation == nil) {
		return refuse("%s needs approval by the client's user, and this client cannot ask (it does not support MCP elicitation)", c.Tool)
	}
	id, err := g.cfg.Approvals.Add(req)
	req.ID = id
	if err != nil {
		return refuse("%s needs approval, and the request could not be stored: %v", c.Tool, err)
	}
	if err := g.record(s, audit.Event{Kind: audit.Decision, Type: "approval_request", Data: withArgs(map[string]any{
		"id": id, "tool": c.Tool, "class": class, "rule": d.Rule, "reason": logReason(d.Reason, slices.Contains(labels, secretLabel)), "step": step, "session": s.id, "labels": labels, "expires": req.Expires,
	}, raw, slices.Contains(labels, secretLabel))}); err != nil {
		g.cfg.Approvals.Expire(id, "the request could not be recorded")
		return refuse("the approval request could not be recorded (%v)", err)
	}
	g.mu.Lock()
	g.waiting[id] = true
	g.mu.Unlock()
	defer func() {
		if ap.Via != "elicitation" {
			g.mu.Lock()
			delete(g.waiting, id)
			g.mu.Unlock()
		}
	}()
	if ap.Via == "elicitation" {
		// The tool's handler asks the client's user (see gate).
		return req, nil
	}
	g.cfg.Logf("%s is held for approval, request %s: cordon approvals show %s; cordon approvals approve %s", c.Tool, id, id, id)
	wctx, cancel := context.WithDeadline(ctx, req.Expires)
	it, err := g.cfg.Approvals.Wait(wctx, id, g.pollEvery())
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		g.cfg.Approvals.Expire(id, "not decided in time")
		it, err = g.cfg.Approvals.Get(id)
	}
	if errors.Is(err, context.Canceled) {
		// The call was cancelled, or its session ended (or cordon is
		// stopping): the request stays pending, for a decision that a
		// gateway of this profile carries out later (Recover).
		g.record(s, audit.Event{Kind: audit.Decision, Type: "approval_outcome", Data: map[string]any{"id": id, "tool": c.Tool, "step": step, "session": s.id, "executed": false, "pending": true, "reason": "the call was cancelled, or its session ended, while the request waited; it stays pending"}})
		return req, refusal(toolpolicy.Decision{Rule: d.Rule, Reason: "the call was cancelled while it waited for approval; it was not made now, and is made once, later, if an approver approves it"})
	}
	if err != nil {
		g.cfg.Logf("request %s: %v", id, err)
		return refuse("the approval failed: %s", withoutID(err, id))
	}
	switch it.State {
	case approvals.Approved:
	case approvals.Expired:
		return refuse("the request was not decided within %s, so it is denied", ap.TimeoutDuration())
	default:
		return refuse("the request was %s by %s: %s", it.State, it.By, it.Why)
	}
	ok, err := g.cfg.Approvals.Claim(id)
	if err != nil || !ok {
		g.cfg.Logf("request %s: approved, but not claimed to run: %v", id, err)
		return refuse("the request was approved but could not be claimed to run")
	}
	s.mu.Lock()
	s.policy.Commit(c)
	if it.Scope == approvals.ScopeSession {
		s.policy.Grant(c)
	}
	s.mu.Unlock()
	g.record(s, audit.Event{Kind: audit.Action, Type: "approved_call", Data: withArgs(map[string]any{"id": id, "tool": c.Tool, "by": it.By, "scope": it.Scope, "step": step, "session": s.id}, raw, slices.Contains(labels, secretLabel))})
	return req, nil
}

// approvalKey carries a held call's pending approval to its handler.
type approvalKey struct{}

type pendingApproval struct {
	id   string
	req  approvals.Request
	sess *session
	call toolpolicy.Call
	// def is the hash of the tool's pinned definition when the call was
	// held (see definition): an answer counts only for that definition.
	def string
	// answered: the call carries the answer to this request's question,
	// put to its session (see answer.go).
	answered bool
}

// gate wraps a tool's handler: a call held for the client's user returns
// an MCP input request (an elicitation) instead of running; the client, or
// the SDK for clients of older protocol versions, calls again with the
// user's answer, and the call runs only when the user approved it.
func (g *Gateway) gate(h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		pa, _ := ctx.Value(approvalKey{}).(*pendingApproval)
		if pa == nil {
			return h(ctx, req)
		}
		answer, ok := req.Params.InputResponses["approval"].(*mcp.ElicitResult)
		if ok && !pa.answered {
			// Asked in this very call, for a client of an older protocol
			// (the SDK put the question and calls again with the answer).
			raw := req.Params.Arguments
			if len(raw) == 0 {
				raw = json.RawMessage("{}")
			}
			pa.answered = g.answered(req.Params.RequestState, req.Session, pa.req.Tool, raw) == pa
		}
		if !ok || !pa.answered {
			state := g.ask(pa, req.Session)
			if state == "" {
				g.cfg.Approvals.Expire(pa.id, "too many questions waiting")
				return refusal(toolpolicy.Decision{Rule: pa.req.Rule, Reason: fmt.Sprintf("%s needs approval, and this agent has %d questions for its client's user waiting already; the call was not made", pa.req.Tool, maxAsked)}), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"approval": elicitation(pa.req)}, RequestState: state}, nil
		}
		by := "the user of MCP client"
		if ip := req.Session.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			by += " " + ip.ClientInfo.Name
		}
		approve, _ := answer.Content["approve"].(bool)
		why, _ := answer.Content["reason"].(string)
		if answer.Action != "accept" {
			approve, why = false, "the user chose "+answer.Action
		}
		_, err := g.cfg.Approvals.Decide(pa.id, approve, by, why, approvals.ScopeCall)
		if err != nil {
			g.cfg.Logf("request %s: %v", pa.id, err)
			return refusal(toolpolicy.Decision{Rule: pa.req.Rule, Reason: fmt.Sprintf("the approval failed: %v; the call was not made", withoutID(err, pa.id))}), nil
		}
		g.record(pa.sess, audit.Event{Kind: audit.Decision, Type: "approval_decision", Data: map[string]any{"id": pa.id, "approve": approve, "by": logReason(by, false), "reason": logReason(why, false), "scope": approvals.ScopeCall}})
		if !approve {
			return refusal(toolpolicy.Decision{Rule: pa.req.Rule, Reason: fmt.Sprintf("the request was denied by %s: %s; the call was not made", by, why)}), nil
		}
		if ok, err := g.cfg.Approvals.Claim(pa.id); err != nil || !ok {
			g.cfg.Logf("request %s: approved, but not claimed to run: %v", pa.id, err)
			return refusal(toolpolicy.Decision{Rule: pa.req.Rule, Reason: "the request was approved but could not be claimed to run; the call was not made"}), nil
		}
		pa.sess.mu.Lock()
		pa.sess.policy.Commit(pa.call)
		pa.sess.mu.Unlock()
		g.record(pa.sess, audit.Event{Kind: audit.Action, Type: "approved_call", Data: withArgs(map[string]any{"id": pa.id, "tool": pa.req.Tool, "by": by, "scope": approvals.ScopeCall, "step": pa.req.Step, "session": pa.sess.id}, pa.req.Args, slices.Contains(pa.req.Labels, secretLabel))})
		res, err := h(ctx, req)
		g.cfg.Approvals.Finish(pa.id, resultSummary(res, err))
		g.mu.Lock()
		delete(g.waiting, pa.id)
		g.mu.Unlock()
		return res, err
	}
}

// withoutID is an error's text with the approval request's id taken out:
// the agent is never shown the id (the operator's stderr and the audit
// log have it).
func withoutID(err error, id string) string {
	text := err.Error()
	if id == "" {
		return text
	}
	text = strings.ReplaceAll(text, fmt.Sprintf("%q", id), "the request")
	text = strings.ReplaceAll(text, "request "+id, "the request")
	return strings.ReplaceAll(text, id, "(the request)")
}

// elicitation is the question put to the client's user.
func elicitation(req approvals.Request) *mcp.ElicitParams {
	// What the agent chose (the arguments) and what a tool server or a
	// profile named (the tool, the labels) is shown escaped: a control or
	// bidirectional character cannot reorder or hide the question.
	var args bytes.Buffer
	if json.Indent(&args, req.Args, "", "  ") != nil {
		args.Reset()
		args.WriteString(termsafe.Line(string(req.Args)))
	}
	labels := "no labels"
	if len(req.Labels) > 0 {
		labels = strings.Join(req.Labels, ", ")
	}
	files := ""
	for _, a := range slices.Sorted(maps.Keys(req.Files)) {
		files += fmt.Sprintf("\n  %s: %s", termsafe.Line(a), termsafe.Line(req.Files[a].Describe()))
	}
	if files != "" {
		files = "\nFiles, as decided (the call is refused if a path names another file when it runs):" + files
	}
	return &mcp.ElicitParams{
		Message: fmt.Sprintf("The agent %s asks to call %s (%s; it cannot be undone: %v).\nWhy approval: %s (%s).\nArguments:\n%s%s\nThe session carries: %s.",
			termsafe.Line(req.Agent), termsafe.Line(req.Tool), termsafe.Line(req.Class), !req.Reversible, termsafe.Line(req.Reason), termsafe.Line(req.Rule),
			termsafe.JSON(args.Bytes()), files, termsafe.Line(labels)),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "description": "run this exact call"},
				"reason":  map[string]any{"type": "string", "description": "why"},
			},
			"required": []string{"approve"},
		},
	}
}

func (g *Gateway) pollEvery() time.Duration {
	if g.cfg.PollEvery > 0 {
		return g.cfg.PollEvery
	}
	return 200 * time.Millisecond
}

// resultSummary is what the store keeps of an approved call's result.
func resultSummary(res mcp.Result, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
		return "the tool failed"
	}
	return "ok"
}

// Recover runs, once, the approved calls of this profile that no live
// session is waiting for (their gateway was restarted, or the agent went
// away), and expires the pending ones past their time. It runs until ctx
// ends.
func (g *Gateway) Recover(ctx context.Context) {
	if g.cfg.Approvals == nil {
		return
	}
	t := time.NewTicker(g.pollEvery())
	defer t.Stop()
	for {
		g.recoverOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gateway) recoverOnce(ctx context.Context) {
	items, err := g.cfg.Approvals.List(approvals.Approved, approvals.Expired)
	if err != nil {
		g.cfg.Logf("%v", err)
		return
	}
	for _, it := range items {
		g.mu.Lock()
		live := g.waiting[it.ID]
		g.mu.Unlock()
		// A live waiter, in this gateway or another of the same profile,
		// claims its approval within a poll; this takes what is left.
		if live || it.ProfileHash != g.hash || (it.State == approvals.Approved && time.Since(it.DecidedAt) < 10*g.pollEvery()) {
			continue
		}
		if it.State == approvals.Expired {
			g.cfg.Approvals.Expire(it.ID, "not decided in time")
			continue
		}
		ok, err := g.cfg.Approvals.Claim(it.ID)
		if err != nil || !ok {
			continue
		}
		s := &session{id: it.Session}
		g.record(s, audit.Event{Kind: audit.Action, Type: "approved_call", Data: withArgs(map[string]any{"id": it.ID, "tool": it.Tool, "by": it.By, "scope": it.Scope, "session": it.Session, "recovered": true}, it.Args, slices.Contains(it.Labels, secretLabel))})
		r := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: it.Tool, Arguments: it.Args}}
		// Held to the files that were approved, resolved again first.
		rctx := withWalked(ctx, &walked{held: true})
		if len(it.Files) > 0 {
			rctx = WithDecidedFiles(rctx, policyFiles(it.Files))
		}
		var res *mcp.CallToolResult
		g.mu.Lock()
		t := g.tools[it.Tool]
		g.mu.Unlock()
		switch {
		case t == nil || t.withdraw != "":
			err = fmt.Errorf("%s is not offered now", it.Tool)
		case t.server == "":
			res, err = g.runBuiltin(rctx, r)
		default:
			res, err = g.runUpstream(rctx, r)
		}
		summary := resultSummary(res, err)
		shown := map[string]any{"id": it.ID, "tool": it.Tool, "session": it.Session, "result": summary}
		if res != nil {
			res, _ = g.cutResult(res, res)
			b, _ := json.Marshal(res.Content)
			rules, found := scanResult(b)
			withContent(shown, b, found, rules, slices.Contains(it.Labels, secretLabel))
		}
		g.record(s, audit.Event{Kind: audit.Input, Type: "tool_result", Data: shown})
		g.cfg.Logf("approved request %s (%s) ran after its session ended: %s", it.ID, it.Tool, summary)
		g.cfg.Approvals.Finish(it.ID, summary)
	}
}

// approvalFiles are a call's decided files as its approval request keeps
// them.
func approvalFiles(files map[string]toolpolicy.File) map[string]approvals.File {
	if len(files) == 0 {
		return nil
	}
	out := make(map[string]approvals.File, len(files))
	for a, f := range files {
		out[a] = approvals.File{Path: f.Path, Exists: f.Exists, Dir: f.Dir, Dev: f.Dev, Ino: f.Ino, Links: f.Links, Stamp: f.Stamp, Above: f.Above}
	}
	return out
}

// policyFiles are the files an approval request was decided on.
func policyFiles(files map[string]approvals.File) map[string]toolpolicy.File {
	out := make(map[string]toolpolicy.File, len(files))
	for a, f := range files {
		out[a] = toolpolicy.File{Path: f.Path, Exists: f.Exists, Dir: f.Dir, Dev: f.Dev, Ino: f.Ino, Links: f.Links, Stamp: f.Stamp, Above: f.Above}
	}
	return out
}
