package telemetry

import (
	"compress/gzip"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// stub is a span with every field set, under a resource and a scope.
func stub(t *testing.T) sdktrace.ReadOnlySpan {
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, err := trace.ParseTraceState("vendor=x")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1700000000, 123)
	return tracetest.SpanStub{
		Name: "cordon.tool_call",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 1, 1, 1, 1, 1, 1, 1},
			TraceFlags: trace.FlagsSampled, TraceState: ts}),
		Parent:    trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}, Remote: true}),
		SpanKind:  trace.SpanKindServer,
		StartTime: start,
		EndTime:   start.Add(time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.String("s", "text"), attribute.String("empty", ""), attribute.Bool("f", false),
			attribute.Int64("i", -7), attribute.Float64("pi", math.Pi),
			attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 0}),
			attribute.BoolSlice("bs", []bool{true}), attribute.Float64Slice("fs", []float64{0.5}),
		},
		Events: []sdktrace.Event{{Name: "held", Time: start.Add(time.Microsecond), Attributes: []attribute.KeyValue{attribute.String("why", "approval")}}},
		Links: []sdktrace.Link{{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}}),
			Attributes: []attribute.KeyValue{attribute.Int("n", 1)}}},
		Status:                 sdktrace.Status{Code: codes.Error, Description: "refused"},
		DroppedAttributes:      3,
		Resource:               resource.NewSchemaless(attribute.String("service.name", "cordon-test")),
		InstrumentationScope:   instrumentation.Scope{Name: scope, Version: "1"},
		DroppedEvents:          1,
		DroppedLinks:           2,
		ChildSpanCount:         0,
		InstrumentationLibrary: instrumentation.Scope{Name: scope, Version: "1"},
	}.Snapshot()
}

// The hand-written encoding decodes, with the official generated types,
// into exactly the span it was made from.
func TestExportRequestDecodes(t *testing.T) {
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(exportRequest([]sdktrace.ReadOnlySpan{stub(t), stub(t)}), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("spans of one resource and scope not grouped: %v", &req)
	}
	rs := req.ResourceSpans[0]
	if got := rs.Resource.Attributes; len(got) != 1 || got[0].Key != "service.name" || got[0].Value.GetStringValue() != "cordon-test" {
		t.Errorf("resource %v", rs.Resource)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != scope || ss.Scope.Version != "1" || len(ss.Spans) != 2 {
		t.Fatalf("scope spans %v", ss)
	}
	s := ss.Spans[0]
	want := &tracepb.Span{
		TraceId:      []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanId:       []byte{1, 1, 1, 1, 1, 1, 1, 1},
		TraceState:   "vendor=x",
		ParentSpanId: []byte{2, 2, 2, 2, 2, 2, 2, 2},
		// sampled, and the parent known to be remote, and remote
		Flags:             0x1 | 0x100 | 0x200,
		Name:              "cordon.tool_call",
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: 1700000000000000123,
		EndTimeUnixNano:   1700000000001000123,
		Attributes: []*commonpb.KeyValue{
			kv("s", &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "text"}}),
			kv("empty", &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: ""}}),
			kv("f", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}}),
			kv("i", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -7}}),
			kv("pi", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.Pi}}),
			kv("ss", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "a"}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "b"}})),
			kv("is", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 0}})),
			kv("bs", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}})),
			kv("fs", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.5}})),
		},
		DroppedAttributesCount: 3,
		Events: []*tracepb.Span_Event{{TimeUnixNano: 1700000000000001123, Name: "held",
			Attributes: []*commonpb.KeyValue{kv("why", &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "approval"}})}}},
		DroppedEventsCount: 1,
		Links: []*tracepb.Span_Link{{TraceId: []byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, SpanId: []byte{9, 0, 0, 0, 0, 0, 0, 0},
			Attributes: []*commonpb.KeyValue{kv("n", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}})}, Flags: 0x100}},
		DroppedLinksCount: 2,
		Status:            &tracepb.Status{Message: "refused", Code: tracepb.Status_STATUS_CODE_ERROR},
	}
	if !proto.Equal(s, want) {
		t.Errorf("span decoded as\n%v\nwant\n%v", s, want)
	}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

func array(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

func clearEnv(t *testing.T) {
	for _, n := range []string{"ENDPOINT", "HEADERS", "TIMEOUT", "COMPRESSION", "PROTOCOL", "CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		t.Setenv("OTEL_EXPORTER_OTLP_"+n, "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_"+n, "")
	}
}

// The environment configures the exporter as the specification says, and
// what cannot be honoured is refused with the variable's name.
func TestExporterEnvironment(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		url     string
		headers map[string]string
		timeout time.Duration
		bad     bool
	}{
		{env: map[string]string{"ENDPOINT": "http://collector:4318"}, url: "http://collector:4318/v1/traces"},
		{env: map[string]string{"ENDPOINT": "https://collector/otlp/"}, url: "https://collector/otlp/v1/traces"},
		{env: map[string]string{"ENDPOINT": "http://a:1", "TRACES_ENDPOINT": "http://b:2/custom"}, url: "http://b:2/custom"},
		{env: map[string]string{"TRACES_ENDPOINT": "http://b:2"}, url: "http://b:2/"},
		{env: map[string]string{"ENDPOINT": "collector:4318"}, bad: true},
		{env: map[string]string{"ENDPOINT": "ftp://collector"}, bad: true},
		{env: map[string]string{"ENDPOINT": "http://c", "PROTOCOL": "grpc"}, bad: true},
		{env: map[string]string{"ENDPOINT": "http://c", "TRACES_PROTOCOL": "http/protobuf"}, url: "http://c/v1/traces"},
		{env: map[string]string{"ENDPOINT": "http://c", "TIMEOUT": "soon"}, bad: true},
		{env: map[string]string{"ENDPOINT": "http://c", "TIMEOUT": "2500"}, url: "http://c/v1/traces", timeout: 2500 * time.Millisecond},
		{env: map[string]string{"ENDPOINT": "http://c", "COMPRESSION": "zstd"}, bad: true},
		{env: map[string]string{"ENDPOINT": "http://c", "CERTIFICATE": "/nonexistent/ca.pem"}, bad: true},
		{env: map[string]string{"ENDPOINT": "http://c", "HEADERS": "api-key=a%20b, bad,x y=1,k=v", "TRACES_HEADERS": ""},
			url: "http://c/v1/traces", headers: map[string]string{"api-key": "a b", "k": "v"}},
		{env: map[string]string{"ENDPOINT": "http://c", "HEADERS": "a=1", "TRACES_HEADERS": "b=2"},
			url: "http://c/v1/traces", headers: map[string]string{"b": "2"}},
	} {
		clearEnv(t)
		for k, v := range tc.env {
			t.Setenv("OTEL_EXPORTER_OTLP_"+k, v)
		}
		e, err := newExporter()
		if tc.bad {
			if err == nil {
				t.Errorf("%v: accepted", tc.env)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if e.url != tc.url {
			t.Errorf("%v: url %s, want %s", tc.env, e.url, tc.url)
		}
		if want := max(tc.timeout, 0); want != 0 && e.timeout != want || want == 0 && e.timeout != defaultTimeout {
			t.Errorf("%v: timeout %v", tc.env, e.timeout)
		}
		if tc.headers != nil && len(e.headers) != len(tc.headers) {
			t.Errorf("%v: headers %v, want %v", tc.env, e.headers, tc.headers)
		}
		for k, v := range tc.headers {
			if e.headers[k] != v {
				t.Errorf("%v: headers %v, want %v", tc.env, e.headers, tc.headers)
			}
		}
	}
}

// A collector that is overloaded is tried again; the request arrives
// compressed, with the headers the environment names.
func TestExporterRetriesAndCompresses(t *testing.T) {
	var calls atomic.Int32
	got := make(chan *coltracepb.ExportTraceServiceRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("Api-Key") != "k" {
			http.Error(w, "bad headers", http.StatusBadRequest)
			return
		}
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(z)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- &req
	}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=k")
	e, err := newExporter()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{stub(t)}); err != nil {
		t.Fatal(err)
	}
	req := <-got
	if n := calls.Load(); n != 2 {
		t.Errorf("%d requests, want 2 (one refused, one taken)", n)
	}
	if s := req.ResourceSpans[0].ScopeSpans[0].Spans[0]; s.Name != "cordon.tool_call" {
		t.Errorf("span %v", s)
	}

	// A request the collector refuses for what it is is not sent again.
	calls.Store(0)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer bad.Close()
	e.url = bad.URL + "/v1/traces"
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{stub(t)}); err == nil {
		t.Error("a refused export reported success")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests for a refused export, want 1", n)
	}
}

// The headers, which hold the collector's keys, never follow a redirect to
// another origin (another host or port, or from https to http).
func TestExporterRedirectKeepsHeaders(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Api-Key") != "" {
			leaked.Add(1)
		}
	}))
	defer elsewhere.Close()
	var here atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			here.Add(1)
			return
		}
		if r.URL.Query().Get("to") == "here" {
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
			return
		}
		http.Redirect(w, r, elsewhere.URL+"/v1/traces", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=secret")
	e, err := newExporter()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{stub(t)}); err == nil {
		t.Error("an export redirected to another origin reported success")
	}
	if n := leaked.Load(); n != 0 {
		t.Errorf("the headers followed a redirect to another origin %d times", n)
	}
	e.url = srv.URL + "/v1/traces?to=here"
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{stub(t)}); err != nil || here.Load() != 1 {
		t.Errorf("a redirect within the collector's origin was not followed: %v", err)
	}
}

// A malformed endpoint is refused without repeating its password.
func TestExporterEndpointErrorRedacted(t *testing.T) {
	for _, v := range []string{"grpc://user:hunter2@collector:4317", "http://user:hunter2@collector:4318/%zz"} {
		clearEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", v)
		_, err := newExporter()
		if err == nil {
			t.Fatalf("%s: taken", v)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error repeats the password: %v", err)
		}
	}
}

// A collector whose certificate is not trusted is not tried again: no
// retry can mend it.
func TestExporterCertificateNotRetried(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	e, err := newExporter()
	if err != nil {
		t.Fatal(err)
	}
	e.timeout = time.Minute
	var tries atomic.Int32
	e.client.Transport = counted{e.client.Transport, &tries}
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{stub(t)}); err == nil {
		t.Fatal("an export to an untrusted certificate reported success")
	}
	if n := tries.Load(); n != 1 {
		t.Errorf("%d tries; want 1", n)
	}
}

// counted counts the requests it sends.
type counted struct {
	rt http.RoundTripper
	n  *atomic.Int32
}

func (c counted) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}
