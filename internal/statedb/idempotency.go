package statedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// States of an idempotency key's entry.
const (
	// KeyRunning: the request is being carried out.
	KeyRunning = "running"
	// KeyDone: its answer is kept.
	KeyDone = "done"
	// KeyUnknown: its node stopped while it ran; its outcome is unknown.
	KeyUnknown = "unknown"
)

// KeyEntry is what is kept of a request sent with an idempotency key.
type KeyEntry struct {
	Agent, Key string
	// Digest identifies the request: the same key with another digest is
	// another request.
	Digest, Node, State string
	// Answer is the answer kept, as the server encoded it.
	Answer  string
	Created time.Time
}

// BeginKey files agent's key for the request of digest, running on node,
// and reports true; when the key is already filed (and not older than
// keep), it returns that entry and false.
func (d *DB) BeginKey(ctx context.Context, agent, key, digest, node string, keep time.Duration) (KeyEntry, bool, error) {
	now := time.Now().UTC()
	if _, err := d.exec(ctx, "DELETE FROM cordon_idempotency WHERE agent = $1 AND key = $2 AND created < $3", agent, key, d.d.when(now.Add(-keep))); err != nil {
		return KeyEntry{}, false, fmt.Errorf("idempotency keys: %w", err)
	}
	res, err := d.exec(ctx, `INSERT INTO cordon_idempotency (agent, key, digest, node, state, answer, created) VALUES ($1, $2, $3, $4, $5, '', $6)
ON CONFLICT (agent, key) DO NOTHING`, agent, key, digest, node, KeyRunning, d.d.when(now))
	if err != nil {
		return KeyEntry{}, false, fmt.Errorf("idempotency keys: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return KeyEntry{Agent: agent, Key: key, Digest: digest, Node: node, State: KeyRunning, Created: now}, true, nil
	}
	e := KeyEntry{Agent: agent, Key: key}
	err = d.db.QueryRowContext(ctx, d.d.param("SELECT digest, node, state, answer FROM cordon_idempotency WHERE agent = $1 AND key = $2"), agent, key).
		Scan(&e.Digest, &e.Node, &e.State, &e.Answer)
	if errors.Is(err, sql.ErrNoRows) {
		return KeyEntry{}, false, fmt.Errorf("idempotency keys: key %q went while it was read; send the request again", key)
	}
	if err != nil {
		return KeyEntry{}, false, fmt.Errorf("idempotency keys: %w", err)
	}
	return e, false, nil
}

// FinishKey keeps the answer of agent's key.
func (d *DB) FinishKey(ctx context.Context, agent, key, answer string) error {
	if _, err := d.exec(ctx, "UPDATE cordon_idempotency SET state = $1, answer = $2 WHERE agent = $3 AND key = $4", KeyDone, answer, agent, key); err != nil {
		return fmt.Errorf("idempotency keys: %w", err)
	}
	return nil
}

// ReleaseKey forgets agent's key while it is running: the request was
// refused before it did anything, and may be sent again under that key.
func (d *DB) ReleaseKey(ctx context.Context, agent, key string) error {
	if _, err := d.exec(ctx, "DELETE FROM cordon_idempotency WHERE agent = $1 AND key = $2 AND state = $3", agent, key, KeyRunning); err != nil {
		return fmt.Errorf("idempotency keys: %w", err)
	}
	return nil
}

// IdempotencyUnknown marks the keys node left running as unknown (it
// stopped while they ran), and returns how many there were.
func (d *DB) IdempotencyUnknown(ctx context.Context, node string) (int, error) {
	res, err := d.exec(ctx, "UPDATE cordon_idempotency SET state = $1 WHERE node = $2 AND state = $3", KeyUnknown, node, KeyRunning)
	if err != nil {
		return 0, fmt.Errorf("idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// PruneKeys forgets the keys filed before before, and returns how many.
func (d *DB) PruneKeys(ctx context.Context, before time.Time) (int64, error) {
	res, err := d.exec(ctx, "DELETE FROM cordon_idempotency WHERE created < $1", d.d.when(before.UTC()))
	if err != nil {
		return 0, fmt.Errorf("idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
