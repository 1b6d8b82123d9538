package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/approvals"
)

// The question put to the client's user shows what the agent, the tool
// server and the profile chose escaped: a bidirectional override, an
// escape sequence or an invisible character cannot reorder or hide it.
func TestElicitationEscapes(t *testing.T) {
	const rlo, esc = "\u202e", "\x1b[2J"
	args, _ := json.Marshal(map[string]string{"path": "notes/" + rlo + "dm.txt" + esc})
	msg := elicitation(approvals.Request{Tool: "up__write" + rlo, Args: args, Class: "write", Agent: "a" + esc,
		Reason: "why" + rlo + "\u2066", Rule: "r" + rlo, Labels: []string{"secret" + rlo}}).Message
	for _, c := range []string{rlo, "\x1b", "\u2066"} {
		if strings.Contains(msg, c) {
			t.Errorf("the question holds %q raw:\n%s", c, msg)
		}
	}
	if !strings.Contains(msg, `\u202e`) || !strings.Contains(msg, "notes/") {
		t.Errorf("the question does not show the arguments, escaped:\n%s", msg)
	}
}
