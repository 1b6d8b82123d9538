package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBenchMetric(t *testing.T) {
	out := `goos: linux
BenchmarkDecide-2              	  100000	      3021 ns/op	         2.1 p50-µs/decision	        13.9 p99-µs/decision
BenchmarkDecideFiles-2         	   20000	     21000 ns/op	         9.0 p50-µs/decision	        41.5 p99-µs/decision
BenchmarkDurable/writers=1-2   	     400	    250000 ns/op	      4000 events/s	         1.0 events/sync
BenchmarkDurable/writers=8-2   	     400	    250000 ns/op	      4900 events/s	         5.0 events/sync
PASS`
	for _, c := range []struct {
		name, metric string
		want         float64
		ok           bool
	}{
		{"BenchmarkDecide", "p99-µs/decision", 13.9, true},
		{"BenchmarkDecideFiles", "p99-µs/decision", 41.5, true},
		{"BenchmarkDurable/writers=8", "events/s", 4900, true},
		{"BenchmarkDurable/writers=8", "MB/s", 0, false},
		{"BenchmarkCall", "added-µs/call", 0, false},
	} {
		v, ok := benchMetric(out, c.name, c.metric)
		if v != c.want || ok != c.ok {
			t.Errorf("benchMetric(%s, %s) = %v, %v; want %v, %v", c.name, c.metric, v, ok, c.want, c.ok)
		}
	}
}

func TestGoals(t *testing.T) {
	saved := make([]goal, len(goals))
	for i, g := range goals {
		saved[i] = *g
	}
	defer func() {
		for i := range goals {
			*goals[i] = saved[i]
		}
	}()
	record(goalColdBwrap, 3.1)
	record(goalAudit, 0.35)
	record(goalNpmOffline, 1)
	record(goalPolicy, 13.9)
	record(goalPolicy, 41.5)
	record(goalPolicy, 2) // the worst stays
	var w bytes.Buffer
	writeGoals(&w)
	for _, want := range []string{
		"| " + goalColdBwrap + " | ≤ 2x | 3.10x | no |",
		"| " + goalAudit + " | ≥ 80% | 35.0% | no |",
		"| " + goalNpmOffline + " | works | works | yes |",
		"| " + goalPolicy + " | ≤ 20 µs | 41.5 µs | no |",
		"| " + goalServeInProc + " | ≤ 1.5x | not measured by bench/run | - |",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("goals table lacks %q:\n%s", want, w.String())
		}
	}
}
