package statedb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// emptyDatabases returns a function that makes a new, empty database of
// each kind the host has (an SQLite file; a PostgreSQL schema when
// CORDON_TEST_POSTGRES names a server) and says where it is.
func emptyDatabases(t *testing.T) map[string]func() string {
	out := map[string]func() string{
		"sqlite": func() string { return filepath.Join(t.TempDir(), "db", "cordon.db") },
	}
	url := os.Getenv("CORDON_TEST_POSTGRES")
	if url == "" {
		return out
	}
	out["postgres"] = func() string {
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
		return url + sep + "search_path=" + schema
	}
	return out
}

// Four nodes opening one empty database at once all start, on the same
// schema version, round after round.
func TestOpenConcurrently(t *testing.T) {
	for kind, empty := range emptyDatabases(t) {
		t.Run(kind, func(t *testing.T) {
			for round := range 6 {
				where := empty()
				var wg sync.WaitGroup
				errs := make([]error, 4)
				for i := range errs {
					wg.Go(func() {
						db, err := Open(context.Background(), where)
						if err != nil {
							errs[i] = err
							return
						}
						defer db.Close()
						if v, err := db.Version(context.Background()); err != nil || v != len(migrations) {
							errs[i] = fmt.Errorf("version %d, want %d: %v", v, len(migrations), err)
						}
					})
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Errorf("round %d, node %d: %v", round, i, err)
					}
				}
			}
		})
	}
}

// A database made before versions were kept takes its tables as version
// 1, keeps what they hold, and gets the later versions; one of a version
// this cordon does not know is refused.
func TestMigrateVersions(t *testing.T) {
	where := filepath.Join(t.TempDir(), "db", "cordon.db")
	os.MkdirAll(filepath.Dir(where), 0o700)
	raw, err := sql.Open("sqlite3", where)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(schemaV1[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("INSERT INTO cordon_approval_journal (line) VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	db, err := Open(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := db.Version(context.Background()); v != len(migrations) {
		t.Fatalf("version %d, want %d", v, len(migrations))
	}
	db.Close()
	var n int
	if err := raw.QueryRow("SELECT count(*) FROM cordon_approval_journal").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the journal after the migration: %d %v", n, err)
	}
	if _, err := raw.Exec("INSERT INTO cordon_schema (version) VALUES (?)", len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), where); err == nil || !strings.Contains(err.Error(), "upgrade cordon") {
		t.Fatalf("a database of a later version: %v", err)
	}
}

// Reservations from many nodes at once pass the bound by none.
func TestReserveSession(t *testing.T) { each(t, testReserveSession) }

func testReserveSession(t *testing.T, db *DB, where string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, full := 0, 0
	expires := time.Now().Add(time.Hour)
	handles := make([]*DB, 8)
	for i := range handles {
		h, err := Open(context.Background(), where)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		handles[i] = h
	}
	start := make(chan struct{})
	for i, other := range handles {
		wg.Go(func() {
			<-start
			info := map[string]any{"state": "running", "expires": expires}
			err := other.ReserveSession(context.Background(), fmt.Sprintf("sb-%d", i), fmt.Sprintf("n%d", i), "a", info, 3, time.Hour, time.Now())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrFull):
				full++
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok != 3 || full != 5 {
		t.Fatalf("reserved %d, refused %d; want 3 and 5", ok, full)
	}
	if n, _ := db.LiveSessions(context.Background(), time.Hour, time.Now()); n != 3 {
		t.Fatalf("live: %d", n)
	}
}
