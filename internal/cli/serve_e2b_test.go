package cli_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/client"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// TestServeTimeout: a command's own timeout ends it with an outcome that
// names that limit, in an exec and in a create's first command; one over
// the profile's wall limit is refused.
func TestServeTimeout(t *testing.T) {
	s := startServe(t, "  timed:\n    profile: timed.yaml\n", map[string]string{
		"timed.yaml": testProfile("timed", "  wall: 5m\n"),
	})
	ctx := context.Background()
	c := s.client("timed")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"sleep", "120"}, Timeout: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, o outcome.Outcome) {
		t.Helper()
		if o.Status != outcome.Timeout || o.Limit == nil || o.Limit.Name != "timeout" || o.Limit.Value != "1s" || !strings.Contains(o.Message, "timeout limit (1s)") {
			t.Errorf("%s: %+v", what, o)
		}
	}
	if sb.Result == nil {
		t.Fatalf("create: no result: %+v", sb)
	}
	check("create", sb.Result.Outcome)
	o, err := c.Exec(ctx, sb.ID, api.ExecRequest{Args: []string{"sleep", "120"}, Timeout: "1s"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("exec", o)
	// Without one, the wall limit holds, and a command that ends in time
	// is not touched.
	if o, err := c.Exec(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}, Timeout: "1m"}, nil, nil); err != nil || o.Status != outcome.OK {
		t.Errorf("a command within its timeout: %+v %v", o, err)
	}
	for _, bad := range []string{"6m", "30", "-1s"} {
		_, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}, Timeout: bad})
		if !client.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("timeout %q: %v", bad, err)
		}
	}
	if _, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"true"}, Timeout: "1h"}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("create with a timeout over the wall limit: %v", err)
	}
}
