package server

import (
	_ "embed"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

func (s *Server) adminRoutes() {
	s.handle("GET "+api.Version+"/approvals", adminOnly, s.approvalList)
	s.handle("GET "+api.Version+"/approvals/{id}", adminOnly, s.approvalGet)
	s.handle("POST "+api.Version+"/approvals/{id}/approve", adminOnly, s.approvalDecide(true))
	s.handle("POST "+api.Version+"/approvals/{id}/deny", adminOnly, s.approvalDecide(false))
	s.handle("GET "+api.Version+"/audit", adminOnly, s.auditQuery)
}

func (s *Server) approvals(w http.ResponseWriter) (*approvals.Store, int) {
	if s.opts.Approvals == nil {
		return nil, fail(w, http.StatusNotFound, "this server keeps no approval store")
	}
	return s.opts.Approvals, 0
}

func (s *Server) approvalList(w http.ResponseWriter, r *http.Request, c caller) int {
	st, status := s.approvals(w)
	if st == nil {
		return status
	}
	var states []string
	if r.URL.Query().Get("all") == "" {
		states = []string{approvals.Pending}
	}
	items, err := st.List(states...)
	if err != nil {
		return fail(w, http.StatusInternalServerError, "reading the approval store: %v", err)
	}
	if items == nil {
		items = []approvals.Item{}
	}
	return reply(w, http.StatusOK, items)
}

func (s *Server) approvalGet(w http.ResponseWriter, r *http.Request, c caller) int {
	st, status := s.approvals(w)
	if st == nil {
		return status
	}
	it, err := st.Get(r.PathValue("id"))
	if err != nil {
		return fail(w, http.StatusNotFound, "%v", err)
	}
	return reply(w, http.StatusOK, it)
}

// approvalDecide decides a request in the name of the admin token; the
// profile's approvers, when it names some, must include that name.
func (s *Server) approvalDecide(approve bool) handler {
	return func(w http.ResponseWriter, r *http.Request, c caller) int {
		st, status := s.approvals(w)
		if st == nil {
			return status
		}
		var d api.Decision
		if err := decode(r, w, 64<<10, &d); err != nil {
			return fail(w, bodyStatus(err), "%v", err)
		}
		if !approve && d.Reason == "" {
			return fail(w, http.StatusBadRequest, "reason: a denial says why")
		}
		if !approve && d.Session {
			return fail(w, http.StatusBadRequest, "session: only an approval can cover the session")
		}
		scope := approvals.ScopeCall
		if d.Session {
			scope = approvals.ScopeSession
		}
		// The decision is written before it is taken: none is taken
		// unrecorded.
		s.record("", c, audit.Action, "approval_decide", map[string]any{"id": r.PathValue("id"), "approve": approve, "token": c.name()})
		if err := s.recordNow(); err != nil {
			return unrecorded(w, "the decision", err)
		}
		it, err := st.Decide(r.PathValue("id"), approve, c.token.Name, d.Reason, scope)
		switch {
		case errors.Is(err, approvals.ErrDecided):
			return fail(w, http.StatusConflict, "%v", err)
		case err != nil:
			return fail(w, http.StatusBadRequest, "%v", err)
		}
		s.event(audit.Event{Sandbox: it.Session, Agent: it.Agent, Kind: audit.Decision, Type: "approval_decision",
			Data: map[string]any{"id": it.ID, "tool": it.Tool, "approve": approve, "by": it.By, "reason": it.Why, "scope": it.Scope}})
		if err := s.auditWritten(s.opts.Audit.Flush()); err != nil {
			return fail(w, http.StatusInternalServerError, "the decision is taken, but not in the audit log: %v", err)
		}
		if err := s.index(); err != nil {
			s.logf("%v", err)
		}
		return reply(w, http.StatusOK, it)
	}
}

// auditQuery answers GET /v1/audit: the records of the audit log that
// match sandbox, agent, type and since, the last limit of them (default
// 200), oldest first, as they are in the log.
func (s *Server) auditQuery(w http.ResponseWriter, r *http.Request, c caller) int {
	q := r.URL.Query()
	limit := 200
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return fail(w, http.StatusBadRequest, "limit: want 1 to 10000, found %q", v)
		}
		limit = n
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fail(w, http.StatusBadRequest, "since: want an RFC 3339 time, found %q", v)
		}
		since = t
	}
	if err := s.opts.Audit.Flush(); err != nil {
		return fail(w, http.StatusInternalServerError, "audit log: %v", err)
	}
	if err := s.index(); err != nil {
		return fail(w, http.StatusBadGateway, "%v", err)
	}
	found, err := s.opts.DB.Search(r.Context(), statedb.Query{Sandbox: q.Get("sandbox"), Agent: q.Get("agent"), Type: q.Get("type"), Since: since, Limit: limit})
	if err != nil {
		return fail(w, http.StatusBadGateway, "%v", err)
	}
	return reply(w, http.StatusOK, found)
}

//go:embed openapi.yaml
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request, c caller) int {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(openAPI)
	return http.StatusOK
}

// jsonLine encodes v as one line of JSON.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
