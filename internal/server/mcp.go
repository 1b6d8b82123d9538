package server

import (
	"net/http"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// gatewayEntry is the MCP gateway of one agent, built from the profile
// whose hash it keeps.
type gatewayEntry struct {
	h     http.Handler
	close func()
	sha   string
}

// mcp serves the MCP tool gateway of the token's agent (streamable HTTP):
// the agent's profile decides every call, which runs in a sandbox of its
// own, held for approval as the profile says, recorded in the audit log
// with the agent's name. The gateway is built on first use, and again when
// the profile changed.
func (s *Server) mcp(w http.ResponseWriter, r *http.Request, c caller) int {
	if s.opts.Gateway == nil {
		return fail(w, http.StatusNotFound, "this server offers no MCP endpoint")
	}
	a := s.opts.Config.Agents[c.token.Agent]
	p, err := a.Current()
	if err != nil {
		return fail(w, http.StatusServiceUnavailable, "%v", err)
	}
	s.mu.Lock()
	g := s.gateways[a.Name]
	if g == nil || g.sha != p.Hash() {
		if g != nil {
			g.close()
		}
		h, closer, err := s.opts.Gateway(s.gatewayCtx, a, p, s.recordGateway)
		if err != nil {
			s.mu.Unlock()
			return fail(w, http.StatusServiceUnavailable, "the MCP gateway of agent %s: %v", a.Name, err)
		}
		if s.gateways == nil {
			s.gateways = map[string]*gatewayEntry{}
		}
		g = &gatewayEntry{h: h, close: closer, sha: p.Hash()}
		s.gateways[a.Name] = g
	}
	s.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	g.h.ServeHTTP(sw, r)
	return sw.status
}

// recordGateway takes a gateway's audit events, and makes them durable
// before the gateway goes on.
func (s *Server) recordGateway(evs ...audit.Event) error {
	for _, ev := range evs {
		s.event(ev)
	}
	return s.opts.Audit.Flush()
}

// statusWriter notes the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer (flushes, for
// streamed answers).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
