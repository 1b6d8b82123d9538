package gateway

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/cordon-sandbox/cordon/internal/telemetry"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// The spans of a tool call (see internal/telemetry): the call, with its
// decision; the wait for a person's approval; the tool's run. They carry
// names, the decision, its rule and the session's labels, never an
// argument or a result.
const (
	spanCall     = "cordon.tool_call"
	spanApproval = "cordon.approval_wait"
	spanRun      = "cordon.tool_run"
)

// traceCall starts the span of a tool call of session.
func traceCall(ctx context.Context, tool, session string) (context.Context, trace.Span) {
	return telemetry.Start(ctx, spanCall, telemetry.Tool.String(tool), telemetry.Session.String(session))
}

// traceDecision notes the decision of the call whose span is in ctx, at
// step, with the labels the session carried.
func traceDecision(ctx context.Context, step int, d toolpolicy.Decision, labels []string) {
	decision := "refuse"
	switch {
	case d.Approval:
		decision = "held"
	case d.Allow:
		decision = "allow"
	}
	trace.SpanFromContext(ctx).SetAttributes(
		telemetry.Decision.String(decision), telemetry.Rule.String(d.Rule),
		telemetry.Step.Int(step), telemetry.Labels.StringSlice(labels))
}
