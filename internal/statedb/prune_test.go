package statedb

import (
	"context"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// The index drops records older than a time, of one node or of all; the
// sessions not described since a time are forgotten.
func TestPrune(t *testing.T) { each(t, testPrune) }

func testPrune(t *testing.T, db *DB, where string) {
	ctx := context.Background()
	now := time.Now().UTC()
	rec := func(seq int64, age time.Duration) audit.Record {
		return audit.Record{Seq: seq, Hash: "h", Event: audit.Event{Time: now.Add(-age), Kind: audit.Decision, Type: "t"}}
	}
	if err := db.Index(ctx, "n1", []audit.Record{rec(1, 48*time.Hour), rec(2, time.Hour), rec(3, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Index(ctx, "n2", []audit.Record{rec(1, 48*time.Hour), rec(2, 0)}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		got, err := db.Search(ctx, Query{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if n, err := db.PruneAudit(ctx, "n1", now.Add(-30*time.Minute)); err != nil || n != 2 || count() != 3 {
		t.Fatalf("n1's records before 30 minutes ago: %d dropped (%v), %d left", n, err, count())
	}
	if n, err := db.PruneAudit(ctx, "", now.Add(-24*time.Hour)); err != nil || n != 1 || count() != 2 {
		t.Fatalf("every node's records before a day ago: %d dropped (%v), %d left", n, err, count())
	}
	if err := db.PutSession(ctx, "sb-1", "n1", "a", map[string]string{"state": "ended"}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PruneSessions(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("a session described now: %d forgotten (%v)", n, err)
	}
	if n, err := db.PruneSessions(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("a session described before: %d forgotten (%v)", n, err)
	}
	if _, err := db.SessionByID(ctx, "sb-1"); err != ErrNotFound {
		t.Fatalf("a forgotten session: %v", err)
	}
}
