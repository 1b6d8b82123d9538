package server

import (
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// ProbeResult is what one run of the escape probes found.
type ProbeResult struct {
	// Statuses counts the probes by status (contained, escaped, error).
	Statuses map[string]int
	// Escaped names the probes that got out.
	Escaped []string
}

// probeState is the schedule of one agent's probe runs.
type probeState struct {
	last    time.Time // when the last run started
	sha     string    // the profile it probed
	running bool
	result  *ProbeResult
}

// scheduleProbes starts, one at a time, the probe runs that are due, when
// probe_every is set: an agent never probed, one whose profile changed
// since, one whose last run is probe_every old. Called by the janitor.
func (s *Server) scheduleProbes() {
	if s.opts.Probe == nil || s.opts.Config.ProbeSched == 0 {
		return
	}
	now := s.opts.Now()
	for name, a := range s.opts.Config.Agents {
		p, err := a.Current()
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.probes == nil {
			s.probes = map[string]*probeState{}
		}
		st := s.probes[name]
		if st == nil {
			st = &probeState{}
			s.probes[name] = st
		}
		busy := false
		for _, other := range s.probes {
			busy = busy || other.running
		}
		due := st.last.IsZero() || st.sha != p.Hash() || now.Sub(st.last) >= s.opts.Config.ProbeSched
		if busy || !due {
			s.mu.Unlock()
			continue
		}
		st.running, st.last, st.sha = true, now, p.Hash()
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			res, err := s.opts.Probe(s.gatewayCtx, a, p)
			s.mu.Lock()
			st.running = false
			if err == nil {
				st.result = &res
			}
			s.mu.Unlock()
			ev := audit.Event{Agent: name, Kind: audit.Decision, Type: "probe_run"}
			if err != nil {
				s.logf("agent %s: the escape probes could not run: %v", name, err)
				ev.Data = map[string]any{"profile_sha256": p.Hash(), "error": err.Error()}
			} else {
				if len(res.Escaped) > 0 {
					s.logf("agent %s: ESCAPED: %s (see cordon probe --compare, cordon lint)", name, strings.Join(res.Escaped, ", "))
				}
				ev.Data = map[string]any{"profile_sha256": p.Hash(), "statuses": res.Statuses, "escaped": res.Escaped}
			}
			s.event(ev)
			s.recorded()
		}()
		return
	}
}

// probeGauges are the metrics of the latest probe run of each agent.
func (s *Server) probeGauges(g map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, st := range s.probes {
		if st.result == nil {
			continue
		}
		for status, n := range st.result.Statuses {
			g[series("cordon_probe_results", "agent", name, "status", status)] = float64(n)
		}
	}
}
