// Package statedb keeps what cordon serve remembers beyond one sandbox:
// the approval journal (the same lines as the file journal, in a table,
// changed under a lock), an index of the audit events (the hash chain
// stays in the audit log's file; the index is what the API queries), and
// the sessions, each as its node last described it.
//
// The database is an SQLite file by default (one node, embedded, nothing
// to run beside cordon), or PostgreSQL when several nodes share it.
package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"       // the "pgx" driver
	_ "github.com/ncruces/go-sqlite3/driver" // the "sqlite3" driver

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// dialect is what differs between the two databases.
type dialect struct {
	driver string
	// postgres selects each migration's PostgreSQL text, else SQLite's.
	postgres bool
	// lock is run first in the approval journal's transaction (SQLite's
	// transactions take the write lock when they begin).
	lock string
	// param turns the queries' $1, $2, ... into the dialect's.
	param func(string) string
	// when is how a time is stored.
	when func(time.Time) any
}

var postgres = dialect{
	driver:   "pgx",
	postgres: true,
	lock:     "SELECT pg_advisory_xact_lock(109330311704430)", // "cordon"
	param:    func(q string) string { return q },
	when:     func(t time.Time) any { return t },
}

var sqlite = dialect{
	driver: "sqlite3",
	param:  func(q string) string { return strings.ReplaceAll(q, "$", "?") },
	when:   func(t time.Time) any { return t.UnixNano() },
}

// schemaV1 is the schema from before versions were kept, in PostgreSQL's
// words and SQLite's (every table IF NOT EXISTS: a database made then
// takes it as version 1).
var schemaV1 = [2]string{`
CREATE TABLE IF NOT EXISTS cordon_approval_journal (
	seq  bigserial PRIMARY KEY,
	line text NOT NULL
);
CREATE TABLE IF NOT EXISTS cordon_audit (
	id      bigserial PRIMARY KEY,
	node    text NOT NULL,
	time    timestamptz NOT NULL,
	sandbox text NOT NULL,
	agent   text NOT NULL,
	kind    text NOT NULL,
	type    text NOT NULL,
	event   jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS cordon_audit_sandbox ON cordon_audit (sandbox, id);
CREATE INDEX IF NOT EXISTS cordon_audit_agent ON cordon_audit (agent, id);
CREATE TABLE IF NOT EXISTS cordon_sandboxes (
	id      text PRIMARY KEY,
	node    text NOT NULL,
	agent   text NOT NULL,
	info    jsonb NOT NULL,
	updated timestamptz NOT NULL
);`, `
CREATE TABLE IF NOT EXISTS cordon_approval_journal (
	seq  integer PRIMARY KEY AUTOINCREMENT,
	line text NOT NULL
);
CREATE TABLE IF NOT EXISTS cordon_audit (
	id      integer PRIMARY KEY AUTOINCREMENT,
	node    text NOT NULL,
	time    integer NOT NULL, -- nanoseconds since 1970, UTC
	sandbox text NOT NULL,
	agent   text NOT NULL,
	kind    text NOT NULL,
	type    text NOT NULL,
	event   text NOT NULL
);
CREATE INDEX IF NOT EXISTS cordon_audit_sandbox ON cordon_audit (sandbox, id);
CREATE INDEX IF NOT EXISTS cordon_audit_agent ON cordon_audit (agent, id);
CREATE TABLE IF NOT EXISTS cordon_sandboxes (
	id      text PRIMARY KEY,
	node    text NOT NULL,
	agent   text NOT NULL,
	info    text NOT NULL,
	updated integer NOT NULL -- nanoseconds since 1970, UTC
);`}

// DB is the state database.
type DB struct {
	db *sql.DB
	// beats is the registry's own pool (nodes.go): a node's heartbeat
	// never waits behind the requests' queries.
	beats *sql.DB
	d     dialect
	name  string
}

// Bounds of a node's connections to PostgreSQL: the requests' pool and
// the heartbeat's; kept open between queries, as a connection costs a
// TLS handshake.
const (
	maxConns     = 24
	maxBeatConns = 2
)

// IsPostgres reports whether where names a PostgreSQL database.
func IsPostgres(where string) bool {
	return strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://")
}

// IsSQLite reports whether where names an SQLite file: "sqlite:PATH", a
// path ending in .db, or an existing regular file.
func IsSQLite(where string) bool {
	if strings.HasPrefix(where, "sqlite:") || strings.HasSuffix(where, ".db") {
		return true
	}
	fi, err := os.Stat(where)
	return err == nil && fi.Mode().IsRegular()
}

// File is the SQLite file where names ("" for PostgreSQL).
func File(where string) string {
	if IsPostgres(where) {
		return ""
	}
	return strings.TrimPrefix(where, "sqlite:")
}

// Open opens the database where names (a postgres:// URL, or an SQLite
// file, created with its directory when missing) and creates the tables
// cordon needs when they are missing.
func Open(ctx context.Context, where string) (*DB, error) {
	d, dsn, name := postgres, where, ""
	if IsPostgres(where) {
		u, err := url.Parse(where)
		if err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		name = "postgres://" + u.Host + u.Path
	} else {
		path, err := filepath.Abs(File(where))
		if err != nil {
			return nil, fmt.Errorf("database %s: %w", where, err)
		}
		// SQLite makes its -wal and -shm files readable by everyone the
		// umask lets: the directory keeps them private.
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("database %s: %w", path, err)
		}
		d, name = sqlite, path
		dsn = (&url.URL{Scheme: "file", OmitHost: true, Path: path,
			RawQuery: "_pragma=busy_timeout(30000)&_pragma=journal_mode(wal)&_pragma=synchronous(full)&_txlock=immediate"}).String()
	}
	db, err := sql.Open(d.driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", name, err)
	}
	out := &DB{db: db, beats: db, d: d, name: name}
	if d.postgres {
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		db.SetConnMaxIdleTime(5 * time.Minute)
		if out.beats, err = sql.Open(d.driver, dsn); err != nil {
			db.Close()
			return nil, fmt.Errorf("database %s: %w", name, err)
		}
		out.beats.SetMaxOpenConns(maxBeatConns)
		out.beats.SetMaxIdleConns(maxBeatConns)
	}
	err = out.migrate(ctx)
	// SQLite turns a new file to WAL on a first connection without
	// waiting for another process doing the same: that one is waited
	// for, a bounded number of times.
	for try := 0; err != nil && !d.postgres && strings.Contains(err.Error(), "database is locked") && try < 100; try++ {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
		err = out.migrate(ctx)
	}
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("database %s: %w", name, err)
	}
	return out, nil
}

// Name names the database in messages (without credentials).
func (d *DB) Name() string { return d.name }

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.db.PingContext(ctx); err != nil {
		return fmt.Errorf("database %s: %w", d.name, err)
	}
	return nil
}

// Close closes the database.
func (d *DB) Close() error {
	if d.beats != d.db {
		d.beats.Close()
	}
	return d.db.Close()
}

// exec runs a statement written with $1, $2, ... placeholders.
func (d *DB) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.db.ExecContext(ctx, d.d.param(q), args...)
}

// Approvals is the approval journal in the database (an
// approvals.Journal).
func (d *DB) Approvals() *Journal { return &Journal{d} }

// Journal is the approval journal's table.
type Journal struct{ d *DB }

// Name names the journal in messages.
func (j *Journal) Name() string { return j.d.name + " cordon_approval_journal" }

// Locked calls f with every line in one transaction that holds the
// journal's lock, and inserts the lines it returns in the same
// transaction.
func (j *Journal) Locked(f func(lines [][]byte) ([][]byte, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := j.d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	defer tx.Rollback()
	if j.d.d.lock != "" {
		if _, err := tx.ExecContext(ctx, j.d.d.lock); err != nil {
			return fmt.Errorf("approval store: lock: %w", err)
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT line FROM cordon_approval_journal ORDER BY seq")
	if err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	var lines [][]byte
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			rows.Close()
			return fmt.Errorf("approval store: %w", err)
		}
		lines = append(lines, []byte(l))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	out, err := f(lines)
	if err != nil || len(out) == 0 {
		return err
	}
	for _, l := range out {
		if _, err := tx.ExecContext(ctx, j.d.d.param("INSERT INTO cordon_approval_journal (line) VALUES ($1)"), string(l)); err != nil {
			return fmt.Errorf("approval store: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	return nil
}

// Index adds records of node's audit log to the index, in one
// transaction.
func (d *DB) Index(ctx context.Context, node string, recs []audit.Record) error {
	if len(recs) == 0 {
		return nil
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit index: %w", err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, d.d.param("INSERT INTO cordon_audit (node, time, sandbox, agent, kind, type, event) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
	if err != nil {
		return fmt.Errorf("audit index: %w", err)
	}
	defer ins.Close()
	for _, r := range recs {
		data, err := json.Marshal(Indexed{Record: r, Hash: r.Hash})
		if err != nil {
			return fmt.Errorf("audit index: %w", err)
		}
		if _, err := ins.ExecContext(ctx, node, d.d.when(r.Time), r.Sandbox, r.Agent, string(r.Kind), r.Type, string(data)); err != nil {
			return fmt.Errorf("audit index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("audit index: %w", err)
	}
	return nil
}

// Query selects indexed events.
type Query struct {
	Sandbox, Agent, Type string
	Since                time.Time
	Limit                int
}

// Indexed is one record of the index: as its node's log holds it (seq,
// prev and hash tie it to that log's chain), with the node.
type Indexed struct {
	Node string `json:"node,omitempty"`
	audit.Record
	Hash string `json:"hash"`
}

// Search returns the last q.Limit matching events, oldest first.
func (d *DB) Search(ctx context.Context, q Query) ([]Indexed, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.Sandbox != "" {
		add("sandbox = $%d", q.Sandbox)
	}
	if q.Agent != "" {
		add("agent = $%d", q.Agent)
	}
	if q.Type != "" {
		add("type = $%d", q.Type)
	}
	if !q.Since.IsZero() {
		add("time >= $%d", d.d.when(q.Since))
	}
	inner := "SELECT id, time, node, event FROM cordon_audit"
	if len(where) > 0 {
		inner += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit)
	query := fmt.Sprintf("SELECT node, event FROM (%s ORDER BY id DESC LIMIT $%d) last ORDER BY time, id", inner, len(args))
	rows, err := d.db.QueryContext(ctx, d.d.param(query), args...)
	if err != nil {
		return nil, fmt.Errorf("audit index: %w", err)
	}
	defer rows.Close()
	out := []Indexed{}
	for rows.Next() {
		var in Indexed
		var data []byte
		if err := rows.Scan(&in.Node, &data); err != nil {
			return nil, fmt.Errorf("audit index: %w", err)
		}
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, fmt.Errorf("audit index: %w", err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// Session is a sandbox as its node last described it.
type Session struct {
	ID, Node, Agent string
	Info            json.RawMessage
}

// PutSession records (or updates) a sandbox of node.
func (d *DB) PutSession(ctx context.Context, id, node, agent string, info any) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	_, err = d.exec(ctx, `INSERT INTO cordon_sandboxes (id, node, agent, info, updated) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET info = EXCLUDED.info, updated = EXCLUDED.updated`, id, node, agent, string(data), d.d.when(time.Now()))
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// Sessions returns the sandboxes of every node but node, of agent ("" for
// all), updated within the last keep.
func (d *DB) Sessions(ctx context.Context, node, agent string, keep time.Duration) ([]Session, error) {
	rows, err := d.db.QueryContext(ctx, d.d.param(`SELECT id, node, agent, info FROM cordon_sandboxes
WHERE node <> $1 AND ($2 = '' OR agent = $2) AND updated > $3 ORDER BY updated`), node, agent, d.d.when(time.Now().Add(-keep)))
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return scanSessions(rows)
}

// scanSessions reads rows of (id, node, agent, info) and closes them.
func scanSessions(rows *sql.Rows) ([]Session, error) {
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		var info []byte
		if err := rows.Scan(&s.ID, &s.Node, &s.Agent, &info); err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		s.Info = info
		out = append(out, s)
	}
	return out, rows.Err()
}

// ErrNotFound is returned when a session is not in the database.
var ErrNotFound = errors.New("not found")

// SessionByID returns one sandbox of any node.
func (d *DB) SessionByID(ctx context.Context, id string) (Session, error) {
	var s Session
	var info []byte
	err := d.db.QueryRowContext(ctx, d.d.param("SELECT id, node, agent, info FROM cordon_sandboxes WHERE id = $1"), id).Scan(&s.ID, &s.Node, &s.Agent, &info)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("sessions: %w", err)
	}
	s.Info = info
	return s, nil
}

// PruneAudit drops the index's records older than before: of node alone,
// or of every node when node is "". It returns how many it dropped.
func (d *DB) PruneAudit(ctx context.Context, node string, before time.Time) (int64, error) {
	res, err := d.exec(ctx, "DELETE FROM cordon_audit WHERE time < $1 AND ($2 = '' OR node = $2)", d.d.when(before), node)
	if err != nil {
		return 0, fmt.Errorf("audit index: pruning: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// PruneSessions forgets the sandboxes of every node last described before
// before (ended long ago, or of a node that is gone). It returns how many
// it forgot.
func (d *DB) PruneSessions(ctx context.Context, before time.Time) (int64, error) {
	res, err := d.exec(ctx, "DELETE FROM cordon_sandboxes WHERE updated < $1", d.d.when(before))
	if err != nil {
		return 0, fmt.Errorf("sessions: pruning: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
