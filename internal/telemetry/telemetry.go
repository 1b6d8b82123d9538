// Package telemetry sends traces of what cordon decides and runs (the tool
// calls of cordon mcp, the requests and commands of cordon serve) to an
// OpenTelemetry collector, over OTLP/HTTP (http/protobuf) with the official
// Go SDK and an exporter of its own (otlp.go).
//
// It is off unless the standard environment names a collector:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, with
// the _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE
// and _CLIENT_KEY of either, as the OpenTelemetry specification says (the
// _PROTOCOL, if set, must be http/protobuf); OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none keep it off. Off, every span is a no-op.
//
// Spans carry names, decisions, rules, labels and sizes: never an
// argument's value, a result, a command's argv or environment, or a token
// (they may hold secrets).
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of cordon's spans.
const (
	Tool     = attribute.Key("cordon.tool")
	Decision = attribute.Key("cordon.decision") // allow, refuse or held
	Rule     = attribute.Key("cordon.rule")
	Step     = attribute.Key("cordon.step")
	Session  = attribute.Key("cordon.session")
	Labels   = attribute.Key("cordon.labels")
	Agent    = attribute.Key("cordon.agent")
	Sandbox  = attribute.Key("cordon.sandbox")
)

// scope names cordon's tracer.
const scope = "github.com/cordon-sandbox/cordon"

// Enabled says whether the environment names a collector.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Setup starts sending traces when the environment names a collector, as
// service (cordon-mcp, cordon-serve) of version; the returned shutdown
// sends what is left and stops. When it names none, nothing is set up and
// shutdown does nothing.
func Setup(ctx context.Context, service, version string) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if !Enabled() {
		return none, nil
	}
	exp, err := newExporter()
	if err != nil {
		return none, fmt.Errorf("telemetry: the OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithAttributes(
		attribute.String("service.name", service), attribute.String("service.version", version)))
	if err != nil {
		return none, fmt.Errorf("telemetry: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Start starts a span, a child of the one in ctx if any.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return otel.Tracer(scope).Start(ctx, name, trace.WithAttributes(attrs...))
}
