package statedb

import (
	"context"
	"errors"
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
