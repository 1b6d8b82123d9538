package statedb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNodes(t *testing.T) { each(t, testNodes) }

// A node registers once per name while it beats; one silent past the
// timeout is declared dead by exactly one of the nodes that find it so,
// and its next heartbeat finds it fenced; a restart of the same name
// after that registers again.
func testNodes(t *testing.T, db *DB, _ string) {
	ctx := context.Background()
	a := Node{Name: "a", Incarnation: "a1", Advertise: "http://a", Load: Load{Agents: map[string]AgentLoad{"w": {Live: 1, Max: 4}}}}
	if err := db.Register(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.Register(ctx, Node{Name: "a", Incarnation: "a2"}, time.Minute); !errors.Is(err, ErrNodeInUse) {
		t.Fatalf("a second live node of the same name: %v, want ErrNodeInUse", err)
	}
	if err := db.Register(ctx, Node{Name: "b", Incarnation: "b1", Advertise: "http://b"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	state, err := db.Heartbeat(ctx, "a", "a1", Load{Agents: map[string]AgentLoad{"w": {Live: 3, Max: 4}}})
	if err != nil || state != NodeAlive {
		t.Fatalf("heartbeat: %q %v", state, err)
	}
	nodes, err := db.Nodes(ctx)
	if err != nil || len(nodes) != 2 || nodes[0].Name != "a" || nodes[0].Load.Agents["w"].Live != 3 || nodes[0].Advertise != "http://a" || nodes[0].Age > time.Minute {
		t.Fatalf("nodes: %+v %v", nodes, err)
	}
	// Not silent long enough: nobody may declare it dead.
	if won, err := db.DeclareDead(ctx, "a", "a1", time.Minute); won || err != nil {
		t.Fatalf("a node that just beat was declared dead: %v %v", won, err)
	}
	// Asked to drain, the node learns it from its heartbeat.
	if ok, err := db.SetNodeState(ctx, "a", "", NodeAlive, NodeDraining); !ok || err != nil {
		t.Fatalf("drain: %v %v", ok, err)
	}
	if state, err := db.Heartbeat(ctx, "a", "a1", Load{}); state != NodeDraining || err != nil {
		t.Fatalf("heartbeat while draining: %q %v", state, err)
	}
	time.Sleep(30 * time.Millisecond)
	wins := 0
	for i := 0; i < 3; i++ {
		won, err := db.DeclareDead(ctx, "a", "a1", 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if won {
			wins++
		}
	}
	if wins != 1 {
		t.Fatalf("the dead node was declared dead %d times, want once", wins)
	}
	if _, err := db.Heartbeat(ctx, "a", "a1", Load{}); !errors.Is(err, ErrFenced) {
		t.Fatalf("heartbeat of a dead node: %v, want ErrFenced", err)
	}
	// A restart of the same name registers again.
	if err := db.Register(ctx, Node{Name: "a", Incarnation: "a3", Advertise: "http://a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := db.NodeByName(ctx, "a"); err != nil || n.State != NodeAlive || n.Incarnation != "a3" {
		t.Fatalf("after the restart: %+v %v", n, err)
	}
	// The old incarnation stays fenced.
	if _, err := db.Heartbeat(ctx, "a", "a1", Load{}); !errors.Is(err, ErrFenced) {
		t.Fatalf("heartbeat of the old incarnation: %v, want ErrFenced", err)
	}
	if _, err := db.NodeByName(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown node: %v", err)
	}
}

func TestEndLost(t *testing.T) { each(t, testEndLost) }

// The sandboxes and running keys of a node declared dead are ended in
// one go, once it is dead, and not once a next run took its name over:
// that run's own are not the last run's.
func testEndLost(t *testing.T, db *DB, _ string) {
	ctx := context.Background()
	if err := db.Register(ctx, Node{Name: "a", Incarnation: "a1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	running := map[string]any{"state": "running"}
	ended := map[string]any{"state": "ended", "ended": "node_lost"}
	if err := db.PutSession(ctx, "sb-1", "a", "w", running); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := db.BeginKey(ctx, "w", "k1", "d", "a", time.Hour); !fresh || err != nil {
		t.Fatalf("%v %v", fresh, err)
	}
	if done, err := db.EndLost(ctx, "a", "a1", map[string]any{"sb-1": ended}); done || err != nil {
		t.Fatalf("the sandboxes of a live node ended: %v %v", done, err)
	}
	time.Sleep(30 * time.Millisecond)
	if won, err := db.DeclareDead(ctx, "a", "a1", 10*time.Millisecond); !won || err != nil {
		t.Fatalf("%v %v", won, err)
	}
	if done, err := db.EndLost(ctx, "a", "a1", map[string]any{"sb-1": ended}); !done || err != nil {
		t.Fatalf("the sandboxes of a dead node: %v %v", done, err)
	}
	if s, err := db.SessionByID(ctx, "sb-1"); err != nil || !strings.Contains(string(s.Info), "node_lost") {
		t.Fatalf("the dead node's sandbox: %s %v", s.Info, err)
	}
	if e, _, err := db.BeginKey(ctx, "w", "k1", "d", "b", time.Hour); err != nil || e.State != KeyUnknown {
		t.Fatalf("the dead node's key: %+v %v", e, err)
	}
	// The next run of a takes the name over, and starts a sandbox and a
	// keyed request.
	if err := db.Register(ctx, Node{Name: "a", Incarnation: "a2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.PutSession(ctx, "sb-2", "a", "w", running); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := db.BeginKey(ctx, "w", "k2", "d", "a", time.Hour); !fresh || err != nil {
		t.Fatalf("%v %v", fresh, err)
	}
	if done, err := db.EndLost(ctx, "a", "a1", map[string]any{"sb-2": ended}); done || err != nil {
		t.Fatalf("the last run's end took the next run's sandboxes: %v %v", done, err)
	}
	if s, err := db.SessionByID(ctx, "sb-2"); err != nil || strings.Contains(string(s.Info), "node_lost") {
		t.Fatalf("the next run's sandbox: %s %v", s.Info, err)
	}
	if e, _, err := db.BeginKey(ctx, "w", "k2", "d", "b", time.Hour); err != nil || e.State != KeyRunning {
		t.Fatalf("the next run's key: %+v %v", e, err)
	}
}
