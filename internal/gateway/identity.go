package gateway

import (
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// The labels and budgets of the tool policy belong to the agent, not to
// one of its connections: every MCP session of one agent shares one
// toolpolicy.Session, so that a new session (a reconnection, a second
// client of the same token) starts with what the agent already read and
// spent. An agent is the token its client presented (auth.TokenInfo's
// UserID, set by the HTTP transport that checked the token); a client
// without one (stdio: one client per process) is the one agent of the
// gateway. The budgets last the profile's session.wall from the first
// call, then the agent's next call starts them anew, its labels and a stop
// rule that held carried over (the agent still holds what it read);
// without session.wall they last as long as the gateway.

// maxStates bounds the agents whose state a gateway keeps. Past it, the
// states whose session.wall is over are dropped; when none is, a new
// agent's calls are refused (an agent's state is never dropped early: that
// would free it of its labels).
var maxStates = 1024

// identity names the agent that made a call.
func identity(r *mcp.CallToolRequest) string {
	if r.Extra != nil && r.Extra.TokenInfo != nil {
		return r.Extra.TokenInfo.UserID
	}
	return ""
}

// session returns the state of the agent that made the call, made on its
// first call; or, when a new agent's state would exceed maxStates, nil and
// the refusal.
func (g *Gateway) session(r *mcp.CallToolRequest) (*session, toolpolicy.Decision) {
	who := identity(r)
	wall := g.cfg.Profile.Session.WallTime()
	now := time.Now()
	over := func(s *session) bool { return wall > 0 && now.Sub(s.start) > wall }
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sessions[who]
	if s != nil && !over(s) {
		return s, toolpolicy.Decision{}
	}
	if s == nil && len(g.sessions) >= maxStates {
		for k, o := range g.sessions {
			if over(o) {
				delete(g.sessions, k)
			}
		}
		if len(g.sessions) >= maxStates {
			return nil, toolpolicy.Decision{Rule: "session", Reason: fmt.Sprintf("cordon keeps the state of at most %d agents, and has no room for another; the call was not made", maxStates)}
		}
	}
	id := ""
	if g.cfg.NewID != nil {
		id = g.cfg.NewID()
	}
	prev := s
	s = &session{id: id, who: who, start: now, policy: toolpolicy.NewSession(g.cfg.Profile, nil)}
	if prev != nil {
		// A new session.wall renews the budgets, not what the agent read.
		prev.mu.Lock()
		s.policy.Carry(prev.policy)
		prev.mu.Unlock()
	}
	g.sessions[who] = s
	return s, toolpolicy.Decision{}
}
