package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/tools"
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

// BenchmarkPathChecks measures what the checks of a tool server's paths
// add to one call (walked.go): the same upstream tool with a path
// argument through a gateway whose resolver stamps what it resolves (the
// paths resolved again after the call and compared) and through one whose
// resolver does not (a remote server's: no check), interleaved. The
// resolver runs in this process: under cordon mcp each resolution is a
// sandbox start besides, which the benchmarks of the whole gateway
// (bench/) count.
func BenchmarkPathChecks(b *testing.B) {
	gateway.TuneGC()
	ctx := context.Background()
	ws := b.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "notes"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes/x"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	def := &mcp.Tool{Name: "open", InputSchema: json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"}}}`)}
	srv.AddTool(def, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	served := *def
	served.Name = "up__open"
	p, err := profile.Parse("bench.yaml", []byte("version: 1\nagent: bench\ntools:\n  up__open:\n    class: read\n    paths: [file]\n    pin: "+gateway.Hash(&served)+"\nservers:\n  up:\n    command: [unused]\n    profile: unused.yaml\n"))
	if err != nil {
		b.Fatal(err)
	}
	resolve := func(stamp bool) gateway.Resolver {
		return func(ctx context.Context, server string, paths []string) (string, []tools.Resolved, error) {
			abs := make([]string, len(paths))
			for i, p := range paths {
				if !filepath.IsAbs(p) {
					p = filepath.Join(ws, p)
				}
				abs[i] = p
			}
			out := tools.ResolvePaths(abs, ws)
			if !stamp {
				for i := range out {
					out[i].Stamp, out[i].Above = "", ""
				}
			}
			return ws, out, nil
		}
	}
	var sessions []*mcp.ClientSession
	for _, stamp := range []bool{false, true} {
		g, err := gateway.New(ctx, gateway.Config{Profile: p, Upstreams: map[string]mcp.Transport{"up": connectServer(b, srv)}, Resolve: resolve(stamp)})
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
	// The directory was just made: let its change time settle first.
	time.Sleep(50 * time.Millisecond)
	args := json.RawMessage(`{"file": "notes/x"}`)
	var took [2][]time.Duration
	for b.Loop() {
		for i, cs := range sessions {
			start := time.Now()
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__open", Arguments: args})
			took[i] = append(took[i], time.Since(start))
			if err != nil || r.IsError {
				b.Fatalf("%v %+v", err, r)
			}
		}
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	u, c := med(took[0]), med(took[1])
	b.ReportMetric(u, "unchecked-µs/call")
	b.ReportMetric(c, "checked-µs/call")
	b.ReportMetric(c-u, "added-µs/call")
}
