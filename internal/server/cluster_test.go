package server

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// max_sandboxes bounds the live sandboxes of every node sharing the
// database: creates on two nodes at once pass it by none; once one ends,
// another may be created.
func TestClusterMaxSandboxes(t *testing.T) {
	where := filepath.Join(t.TempDir(), "db", "cordon.db")
	var nodes []*fixture
	for _, name := range []string{"n1", "n2"} {
		db, err := statedb.Open(context.Background(), where)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		nodes = append(nodes, newFixtureWith(t, 1, nil, nil, nil, func(o *Options) {
			o.DB, o.Node = db, name
			o.Config.MaxSandboxes = 3
		}))
	}
	ctx := context.Background()
	var mu sync.Mutex
	created := map[string]*fixture{}
	refused := 0
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			f := nodes[i%2]
			sb, err := f.client("alice-a").Create(ctx, "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created[sb.ID] = f
			case client.IsStatus(err, 429):
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if len(created) != 3 || refused != 5 {
		t.Fatalf("created %d, refused %d; want 3 and 5", len(created), refused)
	}
	for id, f := range created {
		if _, err := f.client("alice-a").Kill(ctx, id); err != nil {
			t.Fatal(err)
		}
		// The node tells the database within its indexing interval.
		if err := f.srv.index(); err != nil {
			t.Fatal(err)
		}
		break
	}
	if _, err := nodes[1].client("alice-a").Create(ctx, ""); err != nil {
		t.Fatalf("a create once one ended: %v", err)
	}
	// Refused before it takes a sandbox: none is built and ended for it.
	ends := func() string {
		for _, line := range strings.Split(nodes[0].metrics(t), "\n") {
			if v, ok := strings.CutPrefix(line, `cordon_sandbox_ends_total{agent="a",reason="cluster_full"} `); ok {
				return v
			}
		}
		return "0"
	}
	wasted := ends()
	if _, err := nodes[0].client("alice-a").Create(ctx, ""); !client.IsStatus(err, 429) {
		t.Fatalf("a create past the bound again: %v", err)
	}
	if ends() != wasted {
		t.Fatalf("a sandbox was taken and ended for a refused create:\n%s", nodes[0].metrics(t))
	}
}
