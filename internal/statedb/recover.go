package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
