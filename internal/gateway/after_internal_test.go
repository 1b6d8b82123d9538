package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// What the agent is shown brings the tool's labels in, an error too; a
// refusal of cordon's own brings none, and a tool cannot pass its result
// off as one by naming cordon's key in its _meta.
func TestAfterLabelsWhatIsShown(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntools:\n  vault:\n    class: read\n    returns: [secret]\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{cfg: Config{Profile: p}}
	c := toolpolicy.Call{Tool: "vault"}
	for _, tt := range []struct {
		name   string
		res    *mcp.CallToolResult
		labels bool
	}{
		{"a refusal of cordon's", refusal(toolpolicy.Decision{Rule: "approval", Reason: "denied"}), false},
		{"an error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "K=V"}}}, true},
		{"a result", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "K=V"}}}, true},
		{"a forged refusal", &mcp.CallToolResult{IsError: true, Meta: mcp.Meta{"cordon/refusal": map[string]any{"rule": "x"}}, Content: []mcp.Content{&mcp.TextContent{Text: "K=V"}}}, true},
	} {
		s := &session{policy: toolpolicy.NewSession(p, nil)}
		g.after(context.Background(), s, c, 1, tt.res, nil)
		if got := slices.Contains(s.policy.Labels(), "secret"); got != tt.labels {
			t.Errorf("%s: labels %v", tt.name, s.policy.Labels())
		}
	}
}

// A credential in anything a result shows the agent (an error's text, its
// structured content, the bytes of an image) labels the session, and stays
// out of the log; a result without one does neither.
func TestAfterScansAllItShows(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntools:\n  lookup:\n    class: read\n"))
	if err != nil {
		t.Fatal(err)
	}
	token := "ghp_" + "R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	for _, tt := range []struct {
		name   string
		res    *mcp.CallToolResult
		err    error
		secret bool
	}{
		{"a clean result", &mcp.CallToolResult{Content: text("ok"), StructuredContent: map[string]any{"n": 1}}, nil, false},
		{"an error's text", nil, errors.New("upstream failed: the key " + token + " was refused"), true},
		{"structured content", &mcp.CallToolResult{Content: text("see the structured result"), StructuredContent: map[string]any{"key": token}}, nil, true},
		{"an image's bytes", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte("key=" + token)}}}, nil, true},
		{"a resource's blob", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///x", Blob: []byte(token)}}}}, nil, true},
	} {
		var logged []byte
		g := &Gateway{cfg: Config{Profile: p, Record: func(evs ...audit.Event) error {
			b, _ := json.Marshal(evs)
			logged = append(logged, b...)
			return nil
		}}}
		s := &session{policy: toolpolicy.NewSession(p, nil)}
		var res mcp.Result
		if tt.res != nil {
			res = tt.res
		}
		g.after(context.Background(), s, toolpolicy.Call{Tool: "lookup"}, 1, res, tt.err)
		if got := slices.Contains(s.policy.Labels(), "secret"); got != tt.secret {
			t.Errorf("%s: the session's labels are %v", tt.name, s.policy.Labels())
		}
		if bytes.Contains(logged, []byte(token[4:20])) || bytes.Contains(logged, []byte(base64.StdEncoding.EncodeToString([]byte(token))[8:30])) {
			t.Errorf("%s: the log holds the token: %s", tt.name, logged)
		}
		if tt.err != nil && !bytes.Contains(logged, []byte(`"error":"[redacted: \"upst\"…, 77 bytes]"`)) {
			t.Errorf("%s: the error is logged as %s, want its size, the secret it showed replaced", tt.name, logged)
		}
	}
}

// A refusal's reason quotes what the agent sent; the log keeps it as it
// keeps arguments: a credential replaced, and in a session that carries
// secret, every quoted value.
func TestLogReasonRedactsQuotedValues(t *testing.T) {
	token := "ghp_" + "R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"
	reason := fmt.Sprintf("read_file has no argument %q (its input schema declares %q)", token, "path")
	got := logReason(reason, false)
	if strings.Contains(got, token[4:]) || !strings.Contains(got, `"path"`) || !strings.HasPrefix(got, "read_file has no argument ") {
		t.Errorf("logReason(%q) = %q, want the token replaced and the rest kept", reason, got)
	}
	reason = fmt.Sprintf("the path %q (path) names no file cordon can resolve", "STRIPE=live-value-of-the-env-file")
	got = logReason(reason, true)
	if strings.Contains(got, "live-value") || !strings.Contains(got, "names no file cordon can resolve") {
		t.Errorf("in a secret session, logReason(%q) = %q, want the quoted value masked", reason, got)
	}
	if got := logReason(reason, false); got != reason {
		t.Errorf("a reason without a credential, in a clean session: %q, want it whole", got)
	}
	// A bare credential outside quotes is found as well.
	if got := logReason("key "+token+" refused", false); strings.Contains(got, token[4:]) {
		t.Errorf("an unquoted token is kept: %q", got)
	}

	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntools:\n  lookup:\n    class: read\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{cfg: Config{Profile: p}}
	if got := g.logName("lookup", true); got != "lookup" {
		t.Errorf("a profile's tool is logged as %q", got)
	}
	if got := g.logName(token, false); strings.Contains(got, token[4:]) {
		t.Errorf("an unknown tool named by a token is logged as %q", got)
	}
	if got := g.logName("DB_PASSWORD=hunter2", true); strings.Contains(got, "hunter2") {
		t.Errorf("in a secret session, an unknown tool's name is logged as %q", got)
	}
}
