// Package pgstore keeps in PostgreSQL what several cordon serve nodes
// share: the approval journal (the same lines as the file journal, in a
// table, under an advisory lock), an index of every node's audit events
// (each node's hash chain stays in its own log file; the index is what the
// API queries), and the sessions each node runs.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// schema is created when missing; every statement is idempotent.
const schema = `
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
);
`

// approvalLock is the advisory lock key of the approval journal.
const approvalLock = 0x636f72646f6e // "cordon"

// DB is a connection pool to the shared database.
type DB struct {
	pool *pgxpool.Pool
	name string
}

// Open connects to the database at url and creates the tables cordon needs
// when they are missing.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s: creating cordon's tables: %w", redact(cfg.ConnConfig.Host, cfg.ConnConfig.Database), err)
	}
	return &DB{pool: pool, name: redact(cfg.ConnConfig.Host, cfg.ConnConfig.Database)}, nil
}

func redact(host, db string) string { return "postgres://" + host + "/" + db }

// Close closes the pool.
func (d *DB) Close() { d.pool.Close() }

// IsURL reports whether s names a PostgreSQL database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Approvals is the approval journal in the database (an approvals.Journal).
func (d *DB) Approvals() *Journal { return &Journal{d} }

// Journal is the approval journal's table.
type Journal struct{ d *DB }

// Name names the journal in messages.
func (j *Journal) Name() string { return j.d.name + " cordon_approval_journal" }

// Locked calls f with every line under a transaction-scoped advisory lock,
// and inserts the lines it returns in the same transaction.
func (j *Journal) Locked(f func(lines [][]byte) ([][]byte, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := j.d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", approvalLock); err != nil {
		return fmt.Errorf("approval store: lock: %w", err)
	}
	rows, err := tx.Query(ctx, "SELECT line FROM cordon_approval_journal ORDER BY seq")
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
		if _, err := tx.Exec(ctx, "INSERT INTO cordon_approval_journal (line) VALUES ($1)", string(l)); err != nil {
			return fmt.Errorf("approval store: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	return nil
}

// Index adds node's audit events to the shared index.
func (d *DB) Index(ctx context.Context, node string, evs []audit.Event) error {
	if len(evs) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		batch.Queue("INSERT INTO cordon_audit (node, time, sandbox, agent, kind, type, event) VALUES ($1, $2, $3, $4, $5, $6, $7)",
			node, ev.Time, ev.Sandbox, ev.Agent, string(ev.Kind), ev.Type, data)
	}
	if err := d.pool.SendBatch(ctx, batch).Close(); err != nil {
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

// Indexed is one event of the index, with the node that recorded it.
type Indexed struct {
	Node string `json:"node"`
	audit.Event
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
		add("time >= $%d", q.Since)
	}
	sql := "SELECT node, event FROM cordon_audit"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit)
	sql = fmt.Sprintf("SELECT node, event FROM (%s ORDER BY id DESC LIMIT $%d) last ORDER BY time, id", strings.Replace(sql, "SELECT node, event", "SELECT id, time, node, event", 1), len(args))
	rows, err := d.pool.Query(ctx, sql, args...)
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
		if err := json.Unmarshal(data, &in.Event); err != nil {
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
	_, err = d.pool.Exec(ctx, `INSERT INTO cordon_sandboxes (id, node, agent, info, updated) VALUES ($1, $2, $3, $4, now())
ON CONFLICT (id) DO UPDATE SET info = EXCLUDED.info, updated = now()`, id, node, agent, data)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// Sessions returns the sandboxes of every node but node, of agent ("" for
// all), updated within the last keep.
func (d *DB) Sessions(ctx context.Context, node, agent string, keep time.Duration) ([]Session, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, node, agent, info FROM cordon_sandboxes
WHERE node <> $1 AND ($2 = '' OR agent = $2) AND updated > now() - make_interval(secs => $3) ORDER BY updated`, node, agent, keep.Seconds())
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
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
	err := d.pool.QueryRow(ctx, "SELECT id, node, agent, info FROM cordon_sandboxes WHERE id = $1", id).Scan(&s.ID, &s.Node, &s.Agent, &info)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("sessions: %w", err)
	}
	s.Info = info
	return s, nil
}
