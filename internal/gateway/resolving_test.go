package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// countingResolve resolves as fakeResolve does, slowly, counting the
// resolves and the most that ran at once.
type countingResolve struct {
	n, now, most atomic.Int32
}

func (c *countingResolve) resolve(ctx context.Context, server string, paths []string) (string, []tools.Resolved, error) {
	c.n.Add(1)
	now := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		m := c.most.Load()
		if now <= m || c.most.CompareAndSwap(m, now) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	return fakeResolve(nil)(ctx, server, paths)
}

func resolvingGateway(t *testing.T, session string) (*fixture, *countingResolve) {
	t.Helper()
	p, err := profile.Parse("test.yaml", []byte("version: 1\nagent: tester\ntools:\n  read_file:\n    class: read\n"+session))
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingResolve{}
	g, err := gateway.New(context.Background(), gateway.Config{Profile: p, Resolve: cr.resolve,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			return []byte("ok"), false, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return &fixture{g: g}, cr
}

// A call the session can no longer make (its calls spent) is refused as
// such without its paths being resolved: it starts no sandbox.
func TestSpentSessionResolvesNothing(t *testing.T) {
	f, cr := resolvingGateway(t, "session:\n  calls: 2\n")
	cs := f.connect(t)
	for i := 0; i < 2; i++ {
		if text, isErr := call(t, cs, "read_file", `{"path":"a.txt"}`); isErr {
			t.Fatalf("call %d: %s", i, text)
		}
	}
	for i := 0; i < 10; i++ {
		text, isErr := call(t, cs, "read_file", `{"path":"a.txt"}`)
		if !isErr || !strings.Contains(text, "session.calls") {
			t.Fatalf("a call past the budget: %v %s", isErr, text)
		}
	}
	if n := cr.n.Load(); n != 2 {
		t.Fatalf("%d resolves, want the 2 of the calls the session could make", n)
	}
}

// Resolving is bounded in concurrency: many calls at once resolve a few
// at a time.
func TestResolvingIsBounded(t *testing.T) {
	f, cr := resolvingGateway(t, "")
	cs := f.connect(t)
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, cs, "read_file", `{"path":"a.txt"}`)
		}()
	}
	wg.Wait()
	if n, most := cr.n.Load(), cr.most.Load(); n != 24 || most > 4 || most < 2 {
		t.Fatalf("%d resolves, at most %d at once: want 24, at most 4 (and some at once)", n, most)
	}
}
