package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/telemetry"
	"github.com/cordon-sandbox/cordon/internal/version"
)

// traced starts sending traces as service when the environment names an
// OpenTelemetry collector (see internal/telemetry); the returned function
// sends what is left, waiting at most five seconds for the collector.
func traced(ctx context.Context, e *env, service string) (func(), error) {
	shutdown, err := telemetry.Setup(ctx, service, version.String())
	if err != nil {
		return nil, err
	}
	if telemetry.Enabled() {
		fmt.Fprintf(e.stderr, "cordon: sending traces to the OpenTelemetry collector the environment names\n")
	}
	return func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(c); err != nil {
			fmt.Fprintf(e.stderr, "cordon: telemetry: %v\n", err)
		}
	}, nil
}
