package gateway_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// BenchmarkCall measures what the gateway adds to one tool call: the same
// upstream tool called directly, through cordon's gateway with no audit
// log, and through it with a durable audit log (each call and decision,
// then each result, fsynced before the call runs and before its result is
// shown), all over in-memory transports, interleaved.
func BenchmarkCall(b *testing.B) {
	// As cordon mcp and cordon serve run.
	prev := debug.SetGCPercent(100)
	debug.SetGCPercent(prev)
	defer debug.SetGCPercent(prev)
	gateway.TuneGC()
	ctx := context.Background()
	up, tr := newUpstream(b)
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, connectServer(b, up.server), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	pin := ""
	res, err := direct.ListTools(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range res.Tools {
		if t.Name == "echo" {
			served := *t
			served.Name = "up__echo"
			pin = gateway.Hash(&served)
		}
	}
	p, err := profile.Parse("bench.yaml", []byte("version: 1\nagent: bench\ntools:\n  up__echo:\n    class: read\n    pin: "+pin+"\nservers:\n  up:\n    command: [unused]\n    profile: unused.yaml\n"))
	if err != nil {
		b.Fatal(err)
	}
	log, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), audit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	_, tr2 := newUpstream(b)
	var sessions []*mcp.ClientSession
	for _, cfg := range []gateway.Config{
		{Profile: p, Upstreams: map[string]mcp.Transport{"up": tr}},
		{Profile: p, Upstreams: map[string]mcp.Transport{"up": tr2}, Record: log.Append, NewID: func() string { return "bench" }},
	} {
		g, err := gateway.New(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, connectServer(b, g.Server()), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	args := json.RawMessage(`{"text": "hello"}`)
	var took [3][]time.Duration
	for b.Loop() {
		for i, c := range []struct {
			cs   *mcp.ClientSession
			name string
		}{{direct, "echo"}, {sessions[0], "up__echo"}, {sessions[1], "up__echo"}} {
			start := time.Now()
			r, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: args})
			took[i] = append(took[i], time.Since(start))
			if err != nil || r.IsError {
				b.Fatalf("%s: %v %+v", c.name, err, r)
			}
		}
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	d, g, ga := med(took[0]), med(took[1]), med(took[2])
	b.ReportMetric(d, "direct-µs/call")
	b.ReportMetric(g, "gateway-µs/call")
	b.ReportMetric(g-d, "added-µs/call")
	b.ReportMetric(ga, "gateway+audit-µs/call")
	b.ReportMetric(ga-d, "added+audit-µs/call")
}

func connectServer(tb testing.TB, s *mcp.Server) mcp.Transport {
	a, c := mcp.NewInMemoryTransports()
	if _, err := s.Connect(context.Background(), a, nil); err != nil {
		tb.Fatal(err)
	}
	return c
}
