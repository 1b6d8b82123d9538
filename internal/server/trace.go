package server

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/telemetry"
)

// startRequest starts the span of an API request to the endpoint pattern:
// its method and route, never its body, query or token.
func startRequest(r *http.Request, pattern string) (*http.Request, trace.Span) {
	ctx, span := telemetry.Start(r.Context(), "cordon.api "+pattern,
		attribute.String("http.request.method", r.Method), attribute.String("http.route", pattern))
	return r.WithContext(ctx), span
}

// endRequest ends a request's span with the status it got and who made it.
func endRequest(span trace.Span, status int, c caller) {
	span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("cordon.token", c.name()))
	if c.token != nil && c.token.Agent != "" {
		span.SetAttributes(telemetry.Agent.String(c.token.Agent))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// startExec starts the span of a command run in sandbox e: the sandbox and
// its agent, never the command's argv, environment or input.
func startExec(ctx context.Context, e *entry) (context.Context, trace.Span) {
	agent := ""
	if e.agent != nil {
		agent = e.agent.Name
	}
	return telemetry.Start(ctx, "cordon.sandbox_exec", telemetry.Sandbox.String(e.id), telemetry.Agent.String(agent))
}

// endExec ends a command's span with how it ended.
func endExec(span trace.Span, o outcome.Outcome, err error) {
	span.SetAttributes(attribute.String("cordon.outcome", string(o.Status)))
	if err != nil {
		span.SetStatus(codes.Error, "the command could not be run")
	}
	span.End()
}
