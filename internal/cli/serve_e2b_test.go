package cli_test

import (
	"context"
	"net/http"
	neturl "net/url"
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

// TestServeListDir lists directories inside a sandbox: types, a link's
// target (not followed), a name that is not UTF-8, the cut at max, and
// the statuses of what cannot be listed.
func TestServeListDir(t *testing.T) {
	s := startServe(t, "  lister:\n    profile: lister.yaml\n", map[string]string{
		"lister.yaml": testProfile("lister", "  wall: 1m\n"),
	})
	ctx := context.Background()
	c := s.client("lister")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"sh", "-c", `mkdir d d/sub && printf hello > d/a.txt && chmod 640 d/a.txt && ln -s /etc/passwd d/link && touch "d/$(printf 'bad\376')" && mkfifo d/fifo`}})
	if err != nil || sb.Result == nil || sb.Result.Outcome.Status != outcome.OK {
		t.Fatalf("%+v %v", sb, err)
	}
	l, err := c.ListDir(ctx, sb.ID, "/workspace/d", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
		switch e.Name {
		case "a.txt":
			if e.Size != 5 || e.Mode != "0640" || e.Modified.IsZero() {
				t.Errorf("a.txt: %+v", e)
			}
		case "link":
			if e.Target != "/etc/passwd" {
				t.Errorf("link: %+v", e)
			}
		case "bad\uFFFD":
			if string(e.NameBase64) != "bad\xfe" {
				t.Errorf("a name that is not UTF-8: %+v", e)
			}
		}
	}
	if got := strings.Join(names, " "); l.Path != "/workspace/d" || l.Truncated || got != "a.txt:file bad\uFFFD:file fifo:other link:symlink sub:dir" {
		t.Errorf("listing: %s %+v", got, l)
	}
	if l, err := c.ListDir(ctx, sb.ID, "/workspace/d", 2); err != nil || len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("max 2: %+v %v", l, err)
	}
	for path, status := range map[string]int{"/workspace/nothing": http.StatusNotFound, "/workspace/d/a.txt": http.StatusBadRequest, "relative": http.StatusBadRequest} {
		if _, err := c.ListDir(ctx, sb.ID, path, 0); !client.IsStatus(err, status) {
			t.Errorf("%s: %v, want %d", path, err, status)
		}
	}
	if _, err := c.ListDir(ctx, sb.ID, "/workspace", listTooMany); !client.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("max %d: %v", listTooMany, err)
	}
	recs, err := s.client("ops").Audit(ctx, neturl.Values{"sandbox": {sb.ID}, "type": {"files.list"}})
	found := false
	for _, rec := range recs {
		found = found || strings.Contains(strings.Join(strings.Fields(string(rec)), ""), `"entries":5,"path":"/workspace/d","status":200,"truncated":false`)
	}
	if err != nil || !found {
		t.Errorf("the audit log has no record of the listing: %v %s", err, recs)
	}
}

const listTooMany = 10001
