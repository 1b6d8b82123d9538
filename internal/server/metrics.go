package server

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// metrics are the server's counters, exposed at /metrics in Prometheus'
// text format.
type metrics struct {
	mu       sync.Mutex
	counters map[string]float64 // "name{labels}" -> value
	warmNow  map[string]int     // agent -> waiting sandboxes
}

func newMetrics() *metrics {
	return &metrics{counters: map[string]float64{}, warmNow: map[string]int{}}
}

// labelValue escapes a label's value as the exposition format says.
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// series names one series: name{k="v",...}, labels given as pairs.
func series(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name + "{")
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", labels[i], labelValue.Replace(labels[i+1]))
	}
	b.WriteByte('}')
	return b.String()
}

func (m *metrics) add(v float64, name string, labels ...string) {
	m.mu.Lock()
	m.counters[series(name, labels...)] += v
	m.mu.Unlock()
}

func (m *metrics) request(route string, status int) {
	if route == "" {
		route = "unmatched"
	}
	m.add(1, "cordon_http_requests_total", "route", route, "code", fmt.Sprint(status))
}

func (m *metrics) started(agent string, warm bool, err error, took time.Duration) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.add(1, "cordon_sandbox_starts_total", "agent", agent, "warm", fmt.Sprint(warm), "result", result)
	if err == nil {
		m.add(took.Seconds(), "cordon_sandbox_build_seconds_sum", "agent", agent)
		m.add(1, "cordon_sandbox_build_seconds_count", "agent", agent)
	}
}

func (m *metrics) claimed(agent string, warm bool) {
	m.add(1, "cordon_sandbox_claims_total", "agent", agent, "warm", fmt.Sprint(warm))
}

func (m *metrics) ended(agent, why string) {
	m.add(1, "cordon_sandbox_ends_total", "agent", agent, "reason", why)
}

// drift counts a drift check that found changes.
func (m *metrics) drift(agent string) {
	m.add(1, "cordon_drift_events_total", "agent", agent)
}

func (m *metrics) command(agent, status, limit string) {
	m.add(1, "cordon_commands_total", "agent", agent, "status", status)
	if limit != "" {
		m.add(1, "cordon_limit_hits_total", "agent", agent, "limit", limit)
	}
}

func (m *metrics) denial(agent, rule string) {
	m.add(1, "cordon_denials_total", "agent", agent, "rule", rule)
}

func (m *metrics) warm(agent string, n int) {
	m.mu.Lock()
	m.warmNow[agent] = n
	m.mu.Unlock()
}

// help documents each metric.
var help = map[string][2]string{
	"cordon_sandboxes":                   {"gauge", "Claimed sandboxes, by agent and state."},
	"cordon_sandboxes_warm":              {"gauge", "Pre-warmed sandboxes waiting to be claimed, by agent."},
	"cordon_sandbox_starts_total":        {"counter", "Sandboxes built, by agent, whether for the pool, and result."},
	"cordon_sandbox_build_seconds_sum":   {"counter", "Time spent building sandboxes."},
	"cordon_sandbox_build_seconds_count": {"counter", "Sandboxes built, for the average build time."},
	"cordon_sandbox_claims_total":        {"counter", "Sandboxes given to callers, by whether they were pre-warmed."},
	"cordon_sandbox_ends_total":          {"counter", "Sandboxes ended, by reason."},
	"cordon_commands_total":              {"counter", "Commands run, by outcome status."},
	"cordon_limit_hits_total":            {"counter", "Commands ended by a limit, by limit."},
	"cordon_denials_total":               {"counter", "Refusals, by the rule that refused: egress, trajectory, access control."},
	"cordon_drift_events_total":          {"counter", "Drift checks that found a sandbox's containment changed (stopped or, with action warn, reported)."},
	"cordon_approvals_pending":           {"gauge", "Approval requests waiting for a person."},
	"cordon_probe_results":               {"gauge", "Escape probes of each agent's latest run, by status."},
	"cordon_http_requests_total":         {"counter", "API requests, by route and status code."},
	"cordon_commands_refused_total":      {"counter", "Commands refused because a cap on commands running at once was reached, by agent and cap."},
	"cordon_health_degraded":             {"gauge", "1 for each reason the server is degraded for (audit_log, database, disk, builds), else 0."},
}

// write prints every series, with the gauges the server computes now.
func (m *metrics) write(w io.Writer, gauges map[string]float64) {
	m.mu.Lock()
	all := make(map[string]float64, len(m.counters)+len(gauges))
	for k, v := range m.counters {
		all[k] = v
	}
	for agent, n := range m.warmNow {
		all[series("cordon_sandboxes_warm", "agent", agent)] = float64(n)
	}
	m.mu.Unlock()
	for k, v := range gauges {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	last := ""
	for _, k := range keys {
		name, _, _ := strings.Cut(k, "{")
		if name != last {
			if h, ok := help[name]; ok {
				fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, h[1], name, h[0])
			}
			last = name
		}
		fmt.Fprintf(w, "%s %g\n", k, all[k])
	}
}

// serveMetrics answers GET /metrics.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, c caller) int {
	gauges := map[string]float64{}
	s.mu.Lock()
	for _, e := range s.entries {
		state := "running"
		if e.state() != "" {
			state = "ended"
		}
		gauges[series("cordon_sandboxes", "agent", e.agent.Name, "state", state)]++
	}
	s.mu.Unlock()
	for name := range s.opts.Config.Agents {
		k := series("cordon_sandboxes", "agent", name, "state", "running")
		gauges[k] += 0
	}
	if st := s.opts.Approvals; st != nil {
		if items, err := st.List("pending"); err == nil {
			gauges["cordon_approvals_pending"] = float64(len(items))
		}
	}
	s.probeGauges(gauges)
	gauges["cordon_connections_open"] = float64(s.conns.count())
	s.healthGauges(gauges)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, gauges)
	return http.StatusOK
}
