package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// A goal is a figure cordon aims for, and where this run found it.
type goal struct {
	what   string
	target string
	// meets says whether a value reaches the goal.
	meets func(v float64) bool
	// format shows a value.
	format func(v float64) string
	value  float64
	set    bool
}

func atMost(n float64) func(float64) bool  { return func(v float64) bool { return v <= n } }
func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func times(v float64) string               { return strconv.FormatFloat(v, 'f', 2, 64) + "x" }
func mebibytes(v float64) string           { return strconv.FormatFloat(v, 'f', 1, 64) + " MiB" }
func micros(v float64) string              { return strconv.FormatFloat(v, 'f', 1, 64) + " µs" }
func percent(v float64) string             { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }

// Names of the goals, as the measurements record them.
const (
	goalColdBwrap    = "cold start of `/bin/true`, against bwrap"
	goalColdCgroup   = "cold start of `/bin/true`, against bwrap+cgroup"
	goalMany         = "sandboxes started together, per sandbox, against bwrap's"
	goalIdleRun      = "memory per idle sandbox, `cordon run`"
	goalIdleServe    = "memory per idle pre-warmed sandbox, `cordon serve`"
	goalServeHTTP    = "`cordon serve`: claim + run over loopback HTTP, audit_sync each, against a bare fork/exec"
	goalServeInProc  = "a command in a pre-warmed sandbox through the Go API in the same process (sandbox.Box.Exec: no HTTP, no audit log), against a bare fork/exec"
	goalProxyBytes   = "egress proxy throughput, CONNECT, of a direct connection's"
	goalProxySetup   = "egress proxy connection setup, against direct"
	goalAudit        = "audit log, durable events per second, 8 writers, of the sync-bound limit (writers ÷ the fdatasync latency measured in the same run)"
	goalAudit64      = "audit log, durable events per second, 64 writers, of the sync-bound limit"
	goalPolicy       = "tool-policy decision p99, the worst of its benchmarks (decisions on files already resolved included; the resolution is not)"
	goalGatewayCall  = "MCP gateway cost per call, without the audit log"
	goalGoTest       = "`go test -count=1` of a one-file module, inside (the agent's caches warm), against the host's own second run"
	goalNpmOffline   = "`npm ci` of a lock file, a second run, no registry reachable (1: works from the agent's cache)"
	goalNotMeasured  = "not measured by bench/run"
	goalNotMeasuredS = "-"
)

// goals are what the run is held against, in the order they are shown.
var goals = []*goal{
	{what: goalColdBwrap, target: "≤ 2x", meets: atMost(2), format: times},
	{what: goalColdCgroup, target: "≤ 0.8x", meets: atMost(0.8), format: times},
	{what: goalMany, target: "≤ 2x", meets: atMost(2), format: times},
	{what: goalIdleRun, target: "≤ 2 MiB", meets: atMost(2), format: mebibytes},
	{what: goalIdleServe, target: "≤ 1 MiB", meets: atMost(1), format: mebibytes},
	{what: goalServeHTTP, target: "≤ 2.5x", meets: atMost(2.5), format: times},
	{what: goalServeInProc, target: "≤ 1.5x", meets: atMost(1.5), format: times},
	{what: goalProxyBytes, target: "≥ 90%", meets: atLeast(0.9), format: percent},
	{what: goalProxySetup, target: "≤ 1.5x", meets: atMost(1.5), format: times},
	{what: goalAudit, target: "≥ 80%", meets: atLeast(0.8), format: percent},
	{what: goalAudit64, target: "≥ 80%", meets: atLeast(0.8), format: percent},
	{what: goalPolicy, target: "≤ 20 µs", meets: atMost(20), format: micros},
	{what: goalGatewayCall, target: "≤ 150 µs", meets: atMost(150), format: micros},
	{what: goalGoTest, target: "≤ 1.5x", meets: atMost(1.5), format: times},
	{what: goalNpmOffline, target: "works", meets: atLeast(1), format: works},
}

// works shows a yes-or-no figure.
func works(v float64) string {
	if v >= 1 {
		return "works"
	}
	return "fails"
}

// record sets a goal's figure; for the policy, the worst one counts.
func record(what string, v float64) {
	for _, g := range goals {
		if g.what == what {
			if what == goalPolicy && g.set && g.value > v {
				return
			}
			g.value, g.set = v, true
			return
		}
	}
	panic("bench: no goal " + what)
}

// writeGoals writes the table of goals and where each stands.
func writeGoals(w *bytes.Buffer) {
	fmt.Fprintf(w, "### Goals\n\nEach figure this run measured, against the goal cordon holds itself to.\n\n| figure | goal | this run | met |\n|---|---|---:|---|\n")
	for _, g := range goals {
		now, met := goalNotMeasured, goalNotMeasuredS
		if g.set {
			now, met = g.format(g.value), "no"
			if g.meets(g.value) {
				met = "yes"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.what, g.target, now, met)
	}
	fmt.Fprintln(w)
}

// benchMetric is the value of metric (its unit as the benchmark reports
// it) on the first result line of a Go benchmark whose name starts with
// name ("BenchmarkDurable/writers=8"), in go test's output.
func benchMetric(out, name, metric string) (float64, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], name) {
			continue
		}
		rest := strings.TrimPrefix(f[0], name)
		if rest != "" && rest[0] != '-' && rest[0] != '/' {
			continue // BenchmarkDecide is not BenchmarkDecideFiles
		}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] == metric {
				v, err := strconv.ParseFloat(f[i], 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}
