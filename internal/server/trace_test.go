package server

import (
	"context"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/telemetry"
	"github.com/cordon-sandbox/cordon/internal/telemetry/telemetrytest"
)

// Each API request is a span with its route and status, and a command's
// run a child span with its sandbox and outcome; the command's argv and
// the token never reach the collector.
func TestRequestsAreTraced(t *testing.T) {
	r := telemetrytest.New(t)
	shutdown, err := telemetry.Setup(context.Background(), "cordon-test", "1")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 0, nil, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"echo", "argv-marker"}}); err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var routes []string
	var exec, execParent map[string]string
	requests := map[string]map[string]string{}
	for _, s := range r.Spans() {
		a := telemetrytest.Attrs(s)
		if s.Name == "cordon.sandbox_exec" {
			exec = a
			for _, p := range r.Spans() {
				if string(p.SpanId) == string(s.ParentSpanId) {
					execParent = telemetrytest.Attrs(p)
				}
			}
			continue
		}
		routes = append(routes, a["http.route"]+" "+a["http.response.status_code"])
		requests[string(s.SpanId)] = a
	}
	joined := strings.Join(routes, "\n")
	for _, want := range []string{"POST /v1/sandboxes 201", "POST /v1/sandboxes/{id}/exec 200"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no span for %q in:\n%s", want, joined)
		}
	}
	if exec == nil || exec["cordon.sandbox"] != sb.ID || exec["cordon.agent"] != "a" || exec["cordon.outcome"] != "ok" {
		t.Errorf("the command's span: %v", exec)
	}
	if execParent == nil || execParent["http.route"] != "POST /v1/sandboxes/{id}/exec" {
		t.Errorf("the command's span is not a child of its request's: parent %v", execParent)
	}
	for _, b := range r.Bodies() {
		for _, v := range []string{"argv-marker", f.tokens["alice-a"]} {
			if strings.Contains(string(b), v) {
				t.Errorf("%q reached the collector", v)
			}
		}
	}
}
