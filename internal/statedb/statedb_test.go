package statedb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
)

// each runs test on an SQLite file of its own and, when
// CORDON_TEST_POSTGRES names a PostgreSQL (.ci/run starts one), on a new
// schema there; where is what Open opened.
func each(t *testing.T, test func(t *testing.T, db *DB, where string)) {
	t.Run("sqlite", func(t *testing.T) {
		where := filepath.Join(t.TempDir(), "state", "cordon.db")
		db, err := Open(context.Background(), where)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, db, where)
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("CORDON_TEST_POSTGRES")
		if url == "" {
			t.Skip("CORDON_TEST_POSTGRES is not set (.ci/run starts a PostgreSQL and sets it)")
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 6)
		rand.Read(b)
		schema := "cordon_test_" + hex.EncodeToString(b)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.Background())
		})
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "search_path=" + schema
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, db, url)
	})
}

func request() approvals.Request {
	return approvals.Request{Tool: "pay", Args: json.RawMessage(`{"amount":42}`), Class: "financial",
		Agent: "billing", Expires: time.Now().Add(time.Hour)}
}

// Two stores on one database, as two nodes have: a request added through
// one is pending in the other, decided once, and claimed once.
func TestApprovalsShared(t *testing.T) { each(t, testApprovalsShared) }

func testApprovalsShared(t *testing.T, db1 *DB, where string) {
	db2, err := Open(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	s1, err := approvals.OpenJournal(db1.Approvals(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := approvals.OpenJournal(db2.Approvals(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s1.Add(request())
	if err != nil {
		t.Fatal(err)
	}
	pending, err := s2.List(approvals.Pending)
	if err != nil || len(pending) != 1 || pending[0].ID != id || string(pending[0].Args) != `{"amount":42}` {
		t.Fatalf("the other node's pending requests: %+v %v", pending, err)
	}
	if _, err := s2.Decide(id, true, "alice", "ok", approvals.ScopeCall); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Decide(id, false, "bob", "no", approvals.ScopeCall); err == nil || !strings.Contains(err.Error(), "already decided") {
		t.Fatalf("a second decision: %v", err)
	}
	var wins int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		s := s1
		if i%2 == 1 {
			s = s2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.Claim(id)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d claims won, want 1", wins)
	}
}

// A damaged line refuses everything, as in the file journal.
func TestApprovalsDamaged(t *testing.T) { each(t, testApprovalsDamaged) }

func testApprovalsDamaged(t *testing.T, db *DB, _ string) {
	s, err := approvals.OpenJournal(db.Approvals(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.Add(request())
	if _, err := db.exec(context.Background(), "INSERT INTO cordon_approval_journal (line) VALUES ('{not json')"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(id, true, "alice", "", approvals.ScopeCall); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a decision on a damaged journal: %v", err)
	}
}

func TestAuditIndexAndSessions(t *testing.T) { each(t, testAuditIndexAndSessions) }

func testAuditIndexAndSessions(t *testing.T, db *DB, _ string) {
	ctx := context.Background()
	// .250 then .251: as RFC 3339 text ".25Z" sorts after ".251Z"; the
	// index must order by time, not by its text.
	t0 := time.Date(2026, 12, 3, 6, 51, 53, 250_000_000, time.UTC)
	evs := []audit.Record{
		{Seq: 7, Prev: "h6", Hash: "h7", Event: audit.Event{Time: t0, Sandbox: "sb-1", Agent: "a", Kind: audit.Action, Type: "exec", Data: map[string]any{"argv": []string{"make"}}}},
		{Seq: 8, Prev: "h7", Hash: "h8", Event: audit.Event{Time: t0.Add(time.Millisecond), Sandbox: "sb-1", Agent: "a", Kind: audit.Decision, Type: "outcome"}},
		{Seq: 1, Hash: "b1", Event: audit.Event{Time: t0.Add(2 * time.Millisecond), Sandbox: "sb-2", Agent: "b", Kind: audit.Action, Type: "exec"}},
	}
	if err := db.Index(ctx, "node-a", evs[:2]); err != nil {
		t.Fatal(err)
	}
	if err := db.Index(ctx, "node-b", evs[2:]); err != nil {
		t.Fatal(err)
	}
	got, err := db.Search(ctx, Query{Sandbox: "sb-1", Limit: 10})
	if err != nil || len(got) != 2 || got[0].Type != "exec" || got[1].Type != "outcome" || got[0].Node != "node-a" {
		t.Fatalf("sb-1: %+v %v", got, err)
	}
	// Each record keeps its place in its node's chain.
	if got[0].Seq != 7 || got[0].Prev != "h6" || got[0].Hash != "h7" || got[1].Seq != 8 || got[1].Hash != "h8" {
		t.Fatalf("sb-1's records lost their chain: %+v", got)
	}
	got, err = db.Search(ctx, Query{Type: "exec", Limit: 1})
	if err != nil || len(got) != 1 || got[0].Sandbox != "sb-2" {
		t.Fatalf("the last exec: %+v %v", got, err)
	}
	if err := db.PutSession(ctx, "sb-1", "node-a", "a", map[string]any{"id": "sb-1", "state": "running"}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutSession(ctx, "sb-1", "node-a", "a", map[string]any{"id": "sb-1", "state": "ended"}); err != nil {
		t.Fatal(err)
	}
	others, err := db.Sessions(ctx, "node-b", "", time.Hour)
	if err != nil || len(others) != 1 || !strings.Contains(string(others[0].Info), `"ended"`) {
		t.Fatalf("node-b sees: %+v %v", others, err)
	}
	if mine, _ := db.Sessions(ctx, "node-a", "", time.Hour); len(mine) != 0 {
		t.Fatalf("a node's own sessions are not the others': %+v", mine)
	}
	if _, err := db.SessionByID(ctx, "sb-9"); err != ErrNotFound {
		t.Fatalf("an unknown session: %v", err)
	}
}

// The SQLite file's directory is private (SQLite makes its -wal and -shm
// files as the umask lets), and what was written is there after a reopen.
func TestSQLiteFile(t *testing.T) {
	where := filepath.Join(t.TempDir(), "state", "db", "cordon.db")
	db, err := Open(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	rec := audit.Record{Seq: 1, Hash: "h1", Event: audit.Event{Time: time.Now().UTC(), Sandbox: "sb-1", Agent: "a", Kind: audit.Action, Type: "exec"}}
	if err := db.Index(context.Background(), "n", []audit.Record{rec}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	fi, err := os.Stat(filepath.Dir(where))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the database's directory: %v %v", fi.Mode(), err)
	}
	if !IsSQLite(where) || !IsSQLite("sqlite:x") || IsSQLite(t.TempDir()) || !IsPostgres("postgresql://h/d") {
		t.Fatal("IsSQLite/IsPostgres")
	}
	db, err = Open(context.Background(), "sqlite:"+where)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Search(context.Background(), Query{Sandbox: "sb-1", Limit: 5})
	if err != nil || len(got) != 1 || got[0].Node != "n" {
		t.Fatalf("after a reopen: %+v %v", got, err)
	}
	if _, err := Open(context.Background(), filepath.Join(where, "x.db")); err == nil {
		t.Fatal("a database under a file opened")
	}
}
