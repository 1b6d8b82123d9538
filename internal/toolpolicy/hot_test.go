package toolpolicy

import (
	"slices"
	"testing"
	"time"
)

// An allowed call is decided, and its result recorded, without
// allocating once the session has seen its tool: a read labelled by
// prefix rules, a fetch held to two CEL constraints, a read labelled by
// glob rules on its resolved file, and recording each. The one allocation
// left on these paths is a constraint's relative within("dir"), which
// joins dir to the workspace.
func TestAllowedCallsDoNotAllocate(t *testing.T) {
	p := load(t, testProfile)
	p.Session = nil
	s := NewSession(p, nil)
	read := Call{Tool: "read_file", Args: map[string]any{"path": "/workspace/notes.md"}}
	fetch := Call{Tool: "fetch", Args: map[string]any{"url": "https://example.org/"}}

	pc := load(t, `version: 1
agent: b
tools:
  fetch:
    class: external
    constraints:
      - 'args.url.startsWith("https://") && !args.url.contains("@")'
      - 'size(args.url) <= 2048'
`)
	sc := NewSession(pc, nil)

	sf := NewSession(load(t, filesProfile), nil)
	sf.ShareFiles(NewFileLabels())
	rf := file(ws+"/deploy/config/.env.production", 7, 1)

	for _, tt := range []struct {
		name string
		s    *Session
		c    Call
	}{{"read", s, read}, {"fetch", s, fetch}, {"fetch with constraints", sc, fetch}, {"read of a resolved file", sf, rf}} {
		if d := tt.s.Decide(tt.c); !d.Allow {
			t.Fatalf("%s: %+v", tt.name, d)
		}
		if n := testing.AllocsPerRun(100, func() {
			if d := tt.s.Decide(tt.c); !d.Allow {
				t.Fatalf("%s: %+v", tt.name, d)
			}
		}); n != 0 {
			t.Errorf("deciding %s allocates %v times", tt.name, n)
		}
		if n := testing.AllocsPerRun(100, func() { tt.s.Record(tt.s.Steps(), tt.c, false, true) }); n != 0 {
			t.Errorf("recording %s allocates %v times", tt.name, n)
		}
	}
	// The labels recorded are those the result carries.
	if got := sf.Labels(); !slices.Equal(got, []string{"secret"}) {
		t.Errorf("labels after the read of .env.production: %v", got)
	}
	// The same session still refuses what a secret must not reach.
	s.Record(s.Steps(), Call{Tool: "read_file", Args: map[string]any{"path": "/workspace/.env"}}, false, true)
	if d := s.Decide(fetch); d.Allow || d.Rule != "tools.fetch.accepts" {
		t.Errorf("a fetch after a secret was recorded: %+v", d)
	}
}

// latencies reports the p50 and p99 of the decisions timed in took.
func latencies(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	q := func(f float64) float64 { return float64(took[int(float64(len(took)-1)*f)].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.50), "p50-µs/decision")
	b.ReportMetric(q(0.99), "p99-µs/decision")
}
