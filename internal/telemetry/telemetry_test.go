package telemetry_test

import (
	"context"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/telemetry"
	"github.com/cordon-sandbox/cordon/internal/telemetry/telemetrytest"
)

func TestOffByDefault(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	if telemetry.Enabled() {
		t.Fatal("enabled without a collector")
	}
	if _, err := telemetry.Setup(context.Background(), "cordon-test", "1"); err != nil {
		t.Fatal(err)
	}
	_, span := telemetry.Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("a span records with telemetry off")
	}
	span.End()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if telemetry.Enabled() {
		t.Error("enabled with OTEL_SDK_DISABLED=true")
	}
}

func TestSpansReachTheCollector(t *testing.T) {
	r := telemetrytest.New(t)
	shutdown, err := telemetry.Setup(context.Background(), "cordon-test", "1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := telemetry.Start(context.Background(), "parent", telemetry.Tool.String("read_file"))
	_, child := telemetry.Start(ctx, "child")
	child.End()
	parent.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := r.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans received, want 2", len(spans))
	}
	byName := map[string]int{}
	for i, s := range spans {
		byName[s.Name] = i
	}
	p, c := spans[byName["parent"]], spans[byName["child"]]
	if string(c.ParentSpanId) != string(p.SpanId) || string(c.TraceId) != string(p.TraceId) {
		t.Error("the child span is not the parent's")
	}
	if telemetrytest.Attrs(p)["cordon.tool"] != "read_file" {
		t.Errorf("parent attributes %v", telemetrytest.Attrs(p))
	}
}
