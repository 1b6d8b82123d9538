package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LastIndexed returns the seq and hash of the last record of node's log
// in the index; 0 and "" when it holds none.
func (d *DB) LastIndexed(ctx context.Context, node string) (int64, string, error) {
	var data []byte
	err := d.db.QueryRowContext(ctx, d.d.param("SELECT event FROM cordon_audit WHERE node = $1 ORDER BY id DESC LIMIT 1"), node).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("audit index: %w", err)
	}
	var in Indexed
	if err := json.Unmarshal(data, &in); err != nil {
		return 0, "", fmt.Errorf("audit index: the last record of node %s: %w", node, err)
	}
	return in.Seq, in.Hash, nil
}

// CountIndexed returns how many records of node's log the index holds.
func (d *DB) CountIndexed(ctx context.Context, node string) (int64, error) {
	var n int64
	if err := d.db.QueryRowContext(ctx, d.d.param("SELECT count(*) FROM cordon_audit WHERE node = $1"), node).Scan(&n); err != nil {
		return 0, fmt.Errorf("audit index: %w", err)
	}
	return n, nil
}

// NodeSessions returns every session node put in the database.
func (d *DB) NodeSessions(ctx context.Context, node string) ([]Session, error) {
	rows, err := d.db.QueryContext(ctx, d.d.param("SELECT id, node, agent, info FROM cordon_sandboxes WHERE node = $1 ORDER BY id"), node)
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return scanSessions(rows)
}

// ErrFull is returned by ReserveSession when the cluster has its maximum
// of live sandboxes.
var ErrFull = errors.New("the cluster has its max_sandboxes live sandboxes")

// ReserveSession records a new sandbox of node (as PutSession) if fewer
// than max sandboxes of all nodes are live, and returns ErrFull
// otherwise. Live is a session whose info says "running" and whose
// "expires" is after clock (the server's), among those updated within the
// last within (the longest lifetime). The count and the insertion are one transaction,
// under an advisory lock on PostgreSQL and SQLite's write lock: claims on
// several nodes at once cannot pass max together.
func (d *DB) ReserveSession(ctx context.Context, id, node, agent string, info any, max int, within time.Duration, clock time.Time) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	defer tx.Rollback()
	if d.d.postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(109330311704432)"); err != nil {
			return fmt.Errorf("sessions: lock: %w", err)
		}
	}
	now := time.Now()
	live, err := countLive(ctx, tx, d, clock, within)
	if err != nil {
		return err
	}
	if live >= max {
		return fmt.Errorf("%w (%d)", ErrFull, live)
	}
	if _, err := tx.ExecContext(ctx, d.d.param(`INSERT INTO cordon_sandboxes (id, node, agent, info, updated) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET info = EXCLUDED.info, updated = EXCLUDED.updated`), id, node, agent, string(data), d.d.when(now)); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// LiveSessions counts the live sessions of every node (see
// ReserveSession), without a lock: a claim asks it first, so as not to
// take a sandbox it would have to end.
func (d *DB) LiveSessions(ctx context.Context, within time.Duration, clock time.Time) (int, error) {
	return countLive(ctx, d.db, d, clock, within)
}

// countLive counts the sessions whose info says running and whose expiry
// is after now, among those updated within (before the database's
// clock).
func countLive(ctx context.Context, q querier, d *DB, now time.Time, within time.Duration) (int, error) {
	byNode, err := liveByNode(ctx, q, d, "", now, within)
	live := 0
	for _, n := range byNode {
		live += n
	}
	return live, err
}

// LiveByNode counts the live sessions of agent on each node (see
// ReserveSession for live).
func (d *DB) LiveByNode(ctx context.Context, agent string, within time.Duration, clock time.Time) (map[string]int, error) {
	return liveByNode(ctx, d.db, d, agent, clock, within)
}

// querier is a database or a transaction.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// liveByNode counts the live sessions of agent ("" for every agent) on
// each node.
func liveByNode(ctx context.Context, q querier, d *DB, agent string, now time.Time, within time.Duration) (map[string]int, error) {
	rows, err := q.QueryContext(ctx, d.d.param("SELECT node, info FROM cordon_sandboxes WHERE ($1 = '' OR agent = $1) AND updated > $2"), agent, d.d.when(time.Now().Add(-within)))
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	defer rows.Close()
	live := map[string]int{}
	for rows.Next() {
		var node string
		var raw []byte
		if err := rows.Scan(&node, &raw); err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		if running(raw, now) {
			live[node]++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return live, nil
}

// running reports whether a session's info says running, unexpired.
func running(raw []byte, now time.Time) bool {
	var s struct {
		State   string    `json:"state"`
		Expires time.Time `json:"expires"`
	}
	return json.Unmarshal(raw, &s) == nil && s.State == "running" && s.Expires.After(now)
}
