package gateway

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
)

// An answer counts only for the call that was held: the very same
// canonical arguments (no two numbers taken for one) and the same pinned
// definition of the tool, still offered.
func TestAnswerMatchesTheWholeCall(t *testing.T) {
	canon := func(raw string) []byte {
		_, b, err := CanonicalArgs("up__pay", []byte(raw), nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pay := &tool{server: "up", hash: "pinned-1"}
	g := &Gateway{tools: map[string]*tool{"up__pay": pay}}
	ss, other := &mcp.ServerSession{}, &mcp.ServerSession{}
	held := canon(`{"amount": 9007199254740993, "to": "alice"}`)
	ask := func() string {
		pa := &pendingApproval{id: "r1", req: approvals.Request{Tool: "up__pay", Args: held, Expires: time.Now().Add(time.Hour)}, def: g.definition("up__pay")}
		return g.ask(pa, ss)
	}
	state := ask()
	for name, c := range map[string]struct {
		ss   *mcp.ServerSession
		tool string
		raw  []byte
	}{
		"a number a float64 cannot tell apart": {ss, "up__pay", canon(`{"amount": 9007199254740992, "to": "alice"}`)},
		"another argument":                     {ss, "up__pay", canon(`{"amount": 9007199254740993, "to": "mallory"}`)},
		"one argument more":                    {ss, "up__pay", canon(`{"amount": 9007199254740993, "to": "alice", "memo": "x"}`)},
		"another tool":                         {ss, "up__echo", held},
		"another session":                      {other, "up__pay", held},
	} {
		if pa := g.answered(state, c.ss, c.tool, c.raw); pa != nil {
			t.Errorf("%s: answered the held call's question", name)
		}
	}
	// The tool's definition changed (pinned anew) or it was withdrawn:
	// the question no longer counts.
	pay.hash = "pinned-2"
	if g.answered(state, ss, "up__pay", held) != nil {
		t.Error("an answer counted for another definition of the tool")
	}
	pay.hash, pay.withdraw = "pinned-1", "withdrawn"
	if g.answered(state, ss, "up__pay", held) != nil {
		t.Error("an answer counted for a withdrawn tool")
	}
	pay.withdraw = ""
	if g.answered(state, ss, "up__pay", held) == nil {
		t.Fatal("the answer to the very call held")
	}
	if g.answered(state, ss, "up__pay", held) != nil {
		t.Error("an answer counted twice")
	}
}
