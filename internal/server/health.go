package server

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
)

// The reasons /v1/health gives for being degraded.
const (
	reasonAudit    = "audit_log"
	reasonDatabase = "database"
	reasonDisk     = "disk"
	reasonBuilds   = "builds"
)

var healthReasons = []string{reasonAudit, reasonDatabase, reasonDisk, reasonBuilds}

// DefaultMinFree is the free space under the audit log's and the state
// directory's file systems below which the server reports itself degraded.
const DefaultMinFree = 256 << 20

// healthEvery is how often the database is pinged and changes of health
// are logged.
const healthEvery = time.Second

// healthState is what the server learnt of its storage and its builds as
// they happened: the last write of the audit log, the last exchange with
// the database, the last build of each agent.
type healthState struct {
	mu     sync.Mutex
	audit  error
	ping   error            // the last ping of the database
	index  error            // the last time the index was sent
	builds map[string]error // by agent
	// reported is the reasons as last logged.
	reported map[string]string
}

// auditWritten notes how a write of the audit log went, and returns err.
func (s *Server) auditWritten(err error) error {
	s.hstate.mu.Lock()
	s.hstate.audit = err
	s.hstate.mu.Unlock()
	return err
}

// indexed notes how sending the index went.
func (s *Server) indexed(err error) {
	s.hstate.mu.Lock()
	s.hstate.index = err
	s.hstate.mu.Unlock()
}

// built notes how a build of agent's sandbox went.
func (s *Server) built(agent string, err error) {
	s.hstate.mu.Lock()
	defer s.hstate.mu.Unlock()
	if s.hstate.builds == nil {
		s.hstate.builds = map[string]error{}
	}
	if err == nil {
		delete(s.hstate.builds, agent)
	} else {
		s.hstate.builds[agent] = err
	}
}

// degraded returns why the server is degraded now (nil: it is not), by
// reason.
func (s *Server) degraded() map[string]string {
	out := map[string]string{}
	s.hstate.mu.Lock()
	if s.hstate.audit != nil {
		out[reasonAudit] = fmt.Sprintf("the audit log cannot be written: %v", s.hstate.audit)
	}
	switch {
	case s.hstate.ping != nil:
		out[reasonDatabase] = fmt.Sprintf("the database %s does not answer: %v", s.opts.DB.Name(), s.hstate.ping)
	case s.hstate.index != nil:
		out[reasonDatabase] = fmt.Sprintf("the database %s refuses the audit index: %v", s.opts.DB.Name(), s.hstate.index)
	}
	var failing []string
	for agent, err := range s.hstate.builds {
		failing = append(failing, fmt.Sprintf("%s (%v)", agent, err))
	}
	s.hstate.mu.Unlock()
	if len(failing) > 0 {
		sort.Strings(failing)
		out[reasonBuilds] = "sandbox builds fail for agents " + strings.Join(failing, ", ")
	}
	min := s.opts.Config.MinFree
	if min == 0 {
		min = DefaultMinFree
	}
	var low []string
	for _, dir := range s.storageDirs() {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			low = append(low, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		if free := int64(st.Bavail) * int64(st.Bsize); free < min {
			low = append(low, fmt.Sprintf("%s has %d bytes free (min_free_space: %d)", dir, free, min))
		}
	}
	if len(low) > 0 {
		out[reasonDisk] = strings.Join(low, "; ")
	}
	return out
}

// storageDirs are the directories whose file systems the server writes:
// the audit log's and the state directory.
func (s *Server) storageDirs() []string {
	dirs := []string{filepath.Dir(s.opts.Audit.Path())}
	if s.opts.StateDir != "" && s.opts.StateDir != dirs[0] {
		dirs = append(dirs, s.opts.StateDir)
	}
	return dirs
}

// health answers GET /v1/health: ok, degraded with its reasons, or
// stopping (503, so that a balancer sends nothing new).
func (s *Server) health(w http.ResponseWriter, r *http.Request, c caller) int {
	h := api.Health{Status: "ok", Version: s.opts.Version}
	s.mu.Lock()
	for _, e := range s.entries {
		if e.state() == "" {
			h.Sandboxes++
		}
	}
	stopping := s.closed || s.draining
	s.mu.Unlock()
	for _, p := range s.pools {
		h.Warm += len(p.ready)
	}
	reasons := s.degraded()
	for _, k := range healthReasons {
		if d, ok := reasons[k]; ok {
			h.Status = "degraded"
			h.Reasons = append(h.Reasons, api.HealthReason{Reason: k, Detail: d})
		}
	}
	if stopping {
		h.Status = "stopping"
		w.Header().Set("Retry-After", "5")
		return reply(w, http.StatusServiceUnavailable, h)
	}
	return reply(w, http.StatusOK, h)
}

// watchHealth pings the database, tries the audit log again while it
// fails, and logs each change of the server's health.
func (s *Server) watchHealth() {
	defer s.wg.Done()
	t := time.NewTicker(healthEvery)
	defer t.Stop()
	for round := 0; ; round++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.checkHealth()
		if round%600 == 0 {
			s.pruneKeys() // every 10 minutes
		}
	}
}

// checkHealth is one round of watchHealth.
func (s *Server) checkHealth() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := s.opts.DB.Ping(ctx)
	cancel()
	s.hstate.mu.Lock()
	s.hstate.ping = err
	auditErr := s.hstate.audit
	s.hstate.mu.Unlock()
	if auditErr != nil {
		// Nothing may be written for a while: the log is tried again
		// with a record that says it can be written again.
		s.event(audit.Event{Kind: audit.Decision, Type: "audit_log_writable", Data: map[string]any{"after": auditErr.Error()}})
		s.recorded()
	}
	now := s.degraded()
	s.hstate.mu.Lock()
	before := s.hstate.reported
	s.hstate.reported = now
	s.hstate.mu.Unlock()
	for _, k := range healthReasons {
		switch was, is := before[k], now[k]; {
		case is != "" && was == "":
			s.logf("health: degraded: %s: %s", k, is)
		case is == "" && was != "":
			s.logf("health: %s: ok again", k)
		}
	}
}

// healthGauges are cordon_health_degraded{reason}: 1 for each reason the
// server is degraded for, 0 for the others.
func (s *Server) healthGauges(g map[string]float64) {
	now := s.degraded()
	for _, k := range healthReasons {
		v := 0.0
		if now[k] != "" {
			v = 1
		}
		g[series("cordon_health_degraded", "reason", k)] = v
	}
}

// unrecorded refuses a state-changing request whose record could not be
// written (what, err): 503, nothing was done, and it may be sent again
// once the audit log can be written.
func unrecorded(w http.ResponseWriter, what string, err error) int {
	w.Header().Set("Retry-After", "10")
	return fail(w, http.StatusServiceUnavailable, "%s could not be recorded (%v); nothing was done: send it again once the audit log can be written (see /v1/health)", what, err)
}
