package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// A held call is decided only through the channel the profile names. In
// queue mode (the default) that is cordon's approval store, where an
// approver decides in their own name: an answer that arrives in a tool
// call (MCP's inputResponses and requestState) comes from the agent's
// connection, and is refused and recorded as the agent answering its own
// approval. In elicitation mode an answer counts only for a question this
// gateway put, as an elicitation, to that same MCP session, for that very
// call, and only once: the question carries an opaque state of its own
// (never the request's id, which the agent is not shown).

// maxAsked bounds the questions an agent has waiting for its client's
// user; past it, its held calls are refused.
const maxAsked = 16

// asked is a question put to a client's user.
type asked struct {
	pa      *pendingApproval
	ss      *mcp.ServerSession // the session it was put to
	expires time.Time
}

// answers reports whether a call carries an answer to a question (or the
// state of one).
func answers(p *mcp.CallToolParamsRaw) bool {
	return p.RequestState != "" || len(p.InputResponses) > 0
}

// ask registers the question of a held call, put to the session ss, and
// returns the state the client echoes with the answer; "" when the agent
// has too many questions waiting.
func (g *Gateway) ask(pa *pendingApproval, ss *mcp.ServerSession) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asked == nil {
		g.asked = map[string]*asked{}
	}
	now := time.Now()
	n := 0
	for k, q := range g.asked {
		switch {
		case now.After(q.expires):
			delete(g.asked, k)
		case q.pa.sess == pa.sess:
			n++
		}
	}
	if n >= maxAsked {
		return ""
	}
	b := make([]byte, 16)
	rand.Read(b)
	state := hex.EncodeToString(b)
	g.asked[state] = &asked{pa: pa, ss: ss, expires: pa.req.Expires}
	return state
}

// answered takes (once) the question whose state a call echoes, if it
// was put to the session ss for the call tool(raw): the same tool, with
// the same pinned definition, still offered, and the very same canonical
// arguments (raw and the held call's are both CanonicalArgs' encoding,
// compared byte for byte: no decoding that could take two numbers for
// one); nil otherwise.
func (g *Gateway) answered(state string, ss *mcp.ServerSession, tool string, raw json.RawMessage) *pendingApproval {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.asked[state]
	if q == nil || q.ss != ss || ss == nil || q.pa.req.Tool != tool || !bytes.Equal(q.pa.req.Args, raw) || time.Now().After(q.expires) {
		return nil
	}
	if def := g.definitionLocked(tool); def == "-" || def != q.pa.def {
		return nil
	}
	delete(g.asked, state)
	return q.pa
}

// answer takes the answer a call carries to an approval question: the
// pending approval it answers, or the refusal (recorded) when the profile
// does not ask the client's user, or the answer is not to a question this
// gateway put to this session for this call.
func (g *Gateway) answer(r *mcp.CallToolRequest, s *session, c toolpolicy.Call, raw json.RawMessage) (*pendingApproval, *mcp.CallToolResult) {
	refuse := func(rule, why, said string) (*pendingApproval, *mcp.CallToolResult) {
		s.mu.Lock()
		secret := s.carriesSecret()
		s.mu.Unlock()
		// What the agent sent is kept as any arguments are.
		rd := redactor{secret: secret, budget: previewBytes}
		state := rd.text(cutUTF8(r.Params.RequestState, 64))
		name := g.logName(c.Tool, secret)
		g.cfg.Logf("session %s: the agent answered an approval itself (%s, call of %s); refused", s.id, why, name)
		g.record(s, audit.Event{Kind: audit.Decision, Type: "approval_self_answer", Data: withArgs(map[string]any{
			"tool": name, "session": s.id, "client": s.who, "state": state, "executed": false, "reason": why,
		}, raw, secret)})
		return nil, refusal(toolpolicy.Decision{Rule: rule, Reason: said + "; the call was not made"})
	}
	if g.cfg.Profile.ApprovalPolicy().Via != "elicitation" {
		return refuse("approval.via", "the profile's approvals are decided in cordon's approval queue",
			"this call carries an answer to an approval, and this profile's approvals are decided by an approver in cordon's approval queue, never by an answer in a tool call")
	}
	// A question put for this call, whose paths name other files now than
	// those the user approved: refused as such (the approval was of the
	// files, not of their names).
	g.mu.Lock()
	q := g.asked[r.Params.RequestState]
	g.mu.Unlock()
	if q != nil && q.ss == r.Session && r.Session != nil && q.pa.sess == s && q.pa.req.Tool == c.Tool && len(q.pa.req.Files) > 0 {
		if why := differs(holdFile, policyFiles(q.pa.req.Files), c.Files); why != "" {
			return nil, refusal(toolpolicy.Decision{Rule: ruleFiles, Reason: why + ", not the file that was approved; the call was not made"})
		}
	}
	pa := g.answered(r.Params.RequestState, r.Session, c.Tool, raw)
	if pa == nil || pa.sess != s {
		return refuse("approval.via", "not an answer to a question this gateway put to this session for this call",
			"this call carries an answer to an approval question that was not put to this session for this call")
	}
	it, err := g.cfg.Approvals.Get(pa.id)
	switch {
	case err != nil:
		return nil, refusal(toolpolicy.Decision{Rule: pa.req.Rule, Reason: fmt.Sprintf("the approval could not be read (%v); the call was not made", err)})
	case it.State != approvals.Pending:
		return nil, refusal(toolpolicy.Decision{Rule: pa.req.Rule, Reason: "the approval request is " + it.State + "; the call was not made"})
	}
	pa.answered = true
	return pa, nil
}
