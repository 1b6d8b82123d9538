package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/telemetry"
	"github.com/cordon-sandbox/cordon/internal/telemetry/telemetrytest"
)

// Each tool call is a span with its tool, decision, rule, step, session
// and labels; its approval wait and its run are child spans; no argument
// value or result is sent.
func TestCallsAreTraced(t *testing.T) {
	r := telemetrytest.New(t)
	shutdown, err := telemetry.Setup(context.Background(), "cordon-test", "1")
	if err != nil {
		t.Fatal(err)
	}
	l := newLogged(t, "1MiB")
	cs := l.connect(t)
	call(t, cs, "read_file", `{"path": ".env"}`)
	args, _ := json.Marshal(map[string]string{"path": "copy.txt", "content": "marker-" + dbPass})
	call(t, cs, "write_file", string(args))
	call(t, cs, "fetch", `{"url": "https://example.org/marker-url"}`)
	call(t, cs, "write_file", string(bigCall(2<<20).Arguments.(json.RawMessage)))

	// A held call, approved: its wait is a span of its own.
	f := pinned(t)
	fcs := f.connect(t)
	done := callAsync(t, fcs, "up__pay", `{"amount": 60}`)
	req := pending(t, f.store)
	if _, err := f.store.Decide(req.ID, true, "alice", "ok", approvals.ScopeCall); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.isErr {
		t.Fatalf("the approved call: %q", a.text)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	spans := r.Spans()
	var calls []*tracepb.Span
	children := map[string][]string{} // by parent span id
	for _, s := range spans {
		if s.Name == "cordon.tool_call" {
			calls = append(calls, s)
		}
		children[string(s.ParentSpanId)] = append(children[string(s.ParentSpanId)], s.Name)
	}
	if len(calls) != 5 {
		t.Fatalf("%d call spans, want 5", len(calls))
	}
	want := []struct{ tool, decision, rule, step, labels, children string }{
		{"read_file", "allow", "tools.read_file", "1", "", "cordon.tool_run"},
		{"write_file", "allow", "tools.write_file", "2", "secret,untrusted", "cordon.tool_run"},
		{"fetch", "refuse", "tools.fetch.accepts", "3", "secret,untrusted", ""},
		{"write_file", "refuse", "session.max_argument_bytes", "0", "", ""},
		{"up__pay", "held", "approval.tools.up__pay.when", "1", "", "cordon.approval_wait cordon.tool_run"},
	}
	for i, w := range want {
		a := telemetrytest.Attrs(calls[i])
		got := struct{ tool, decision, rule, step, labels, children string }{a["cordon.tool"], a["cordon.decision"], a["cordon.rule"], a["cordon.step"], a["cordon.labels"], strings.Join(children[string(calls[i].SpanId)], " ")}
		if got != w {
			t.Errorf("call %d: %+v, want %+v", i, got, w)
		}
		if a["cordon.session"] == "" {
			t.Errorf("call %d has no session", i)
		}
	}
	for _, b := range r.Bodies() {
		for _, v := range []string{"marker-", dbPass, stripeKey, "example.org", "from "} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("an argument or result reached the collector: %q", v)
			}
		}
	}
}
