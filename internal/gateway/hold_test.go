package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
)

// pending waits for the one pending request of the store.
func pending(t *testing.T, s *approvals.Store) approvals.Item {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		items, err := s.List(approvals.Pending)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 1 {
			return items[0]
		}
		if len(items) > 1 || time.Now().After(deadline) {
			t.Fatalf("pending requests: %+v", items)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type answer struct {
	text  string
	isErr bool
}

// callAsync makes a call that will be held.
func callAsync(t *testing.T, cs *mcp.ClientSession, tool, args string) chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			ch <- answer{err.Error(), true}
			return
		}
		ch <- answer{res.Content[0].(*mcp.TextContent).Text, res.IsError}
	}()
	return ch
}

func (f *fixture) payments() int {
	f.up.mu.Lock()
	defer f.up.mu.Unlock()
	return f.up.paid
}

func TestHeldUntilApprovedOnce(t *testing.T) {
	f := pinned(t)
	cs := f.connect(t)
	got := callAsync(t, cs, "up__pay", `{"amount": 90}`)
	req := pending(t, f.store)
	if req.Tool != "up__pay" || string(req.Args) != `{"amount":90}` || req.Class != "financial" || req.Reversible || req.Rule != "approval.tools.up__pay.when" || req.Agent != "tester" {
		t.Errorf("request: %+v", req)
	}
	if f.payments() != 0 {
		t.Fatal("paid before approval")
	}
	if _, err := f.store.Decide(req.ID, true, "alice", "invoice 42", approvals.ScopeCall); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.isErr || a.text != "paid" {
		t.Fatalf("approved call: %+v", a)
	}
	if it, _ := f.store.Get(req.ID); it.State != approvals.Done || f.payments() != 1 {
		t.Errorf("after the call: %s, %d payments", it.State, f.payments())
	}
	// The same call again is held again, and this time denied.
	got = callAsync(t, cs, "up__pay", `{"amount": 90}`)
	req2 := pending(t, f.store)
	f.store.Decide(req2.ID, false, "bob", "paid already", approvals.ScopeCall)
	a := <-got
	if !a.isErr || !strings.Contains(a.text, "was denied by bob: paid already; the call was not made") {
		t.Errorf("denied call: %+v", a)
	}
	if len(req2.Recent) == 0 || !strings.Contains(req2.Recent[len(req2.Recent)-1].Call, "up__pay") {
		t.Errorf("the request lacks the session's recent calls: %+v", req2.Recent)
	}
	if f.payments() != 1 {
		t.Errorf("%d payments, want 1", f.payments())
	}
}

func TestApprovedForTheSession(t *testing.T) {
	f := pinned(t)
	cs := f.connect(t)
	got := callAsync(t, cs, "up__pay", `{"amount": 70}`)
	req := pending(t, f.store)
	f.store.Decide(req.ID, true, "alice", "standing order", approvals.ScopeSession)
	<-got
	if text, isErr := call(t, cs, "up__pay", `{"amount": 70}`); isErr || text != "paid" {
		t.Errorf("identical call in the session: %v %q", isErr, text)
	}
	// Not another amount, and not another agent.
	got = callAsync(t, cs, "up__pay", `{"amount": 71}`)
	f.store.Decide(pending(t, f.store).ID, false, "alice", "no", approvals.ScopeCall)
	<-got
	got = callAsync(t, f.connectAs(t, "other"), "up__pay", `{"amount": 70}`)
	f.store.Decide(pending(t, f.store).ID, false, "alice", "no", approvals.ScopeCall)
	<-got
	if f.payments() != 2 {
		t.Errorf("%d payments, want 2", f.payments())
	}
}

func TestUnapprovedCallsAreNotMade(t *testing.T) {
	// Not decided in time.
	f := pinned(t, "1s", "queue")
	text, isErr := call(t, f.connect(t), "up__pay", `{"amount": 90}`)
	if !isErr || !strings.Contains(text, "was not decided within 1s, so it is denied; the call was not made") {
		t.Errorf("timeout: %v %q", isErr, text)
	}
	// The store fails.
	f = pinned(t)
	journal := filepath.Join(f.store.Dir(), "requests.jsonl")
	os.WriteFile(journal, []byte("garbage\n"), 0o600)
	text, isErr = call(t, f.connect(t), "up__pay", `{"amount": 90}`)
	if !isErr || !strings.Contains(text, "the request could not be stored: approval store") || !strings.Contains(text, "damaged") {
		t.Errorf("damaged store: %v %q", isErr, text)
	}
	// The client cannot ask its user.
	f = pinned(t, "1m", "elicitation")
	text, isErr = call(t, f.connect(t), "up__pay", `{"amount": 90}`)
	if !isErr || !strings.Contains(text, "this client cannot ask (it does not support MCP elicitation); the call was not made") {
		t.Errorf("no elicitation: %v %q", isErr, text)
	}
	if f.payments() != 0 {
		t.Errorf("%d payments, want none", f.payments())
	}
}

func TestElicitation(t *testing.T) {
	f := pinned(t, "1m", "elicitation")
	for _, c := range []struct {
		action  string
		approve bool
		want    string
	}{
		{"accept", true, "paid"},
		{"accept", false, "was denied by the user of MCP client agent: not now"},
		{"decline", true, "was denied by the user of MCP client agent: the user chose decline"},
	} {
		var asked string
		a, b := mcp.NewInMemoryTransports()
		if _, err := f.g.Server().Connect(context.Background(), a, nil); err != nil {
			t.Fatal(err)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = req.Params.Message
				return &mcp.ElicitResult{Action: c.action, Content: map[string]any{"approve": c.approve, "reason": "not now"}}, nil
			},
		})
		cs, err := client.Connect(context.Background(), b, nil)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := call(t, cs, "up__pay", `{"amount": 90}`)
		if !strings.Contains(text, c.want) {
			t.Errorf("%s %v: %q, want %q", c.action, c.approve, text, c.want)
		}
		if !strings.Contains(asked, "call up__pay (financial; it cannot be undone: true)") || !strings.Contains(asked, `"amount": 90`) {
			t.Errorf("the user was asked %q", asked)
		}
		cs.Close()
	}
	if f.payments() != 1 {
		t.Errorf("%d payments, want 1", f.payments())
	}
}

func TestApprovedAfterTheSessionEnded(t *testing.T) {
	f := pinned(t)
	ctx, cancel := context.WithCancel(context.Background())
	cs := f.connect(t)
	go cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__pay", Arguments: json.RawMessage(`{"amount": 99}`)})
	req := pending(t, f.store)
	cancel()
	cs.Close()
	// The request outlives the session; approved, the gateway runs it once.
	time.Sleep(50 * time.Millisecond)
	f.store.Decide(req.ID, true, "alice", "late but fine", approvals.ScopeCall)
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	go f.g.Recover(rctx)
	go f.g.Recover(rctx) // a second gateway of the same profile
	deadline := time.Now().Add(10 * time.Second)
	for {
		if it, _ := f.store.Get(req.ID); it.State == approvals.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approved request did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if f.payments() != 1 {
		t.Errorf("%d payments, want 1", f.payments())
	}
}
