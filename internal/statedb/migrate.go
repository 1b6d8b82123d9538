package statedb

import (
	"context"
	"fmt"
)

// migration is one version of cordon's schema: what takes a database
// from the version before to this one, in PostgreSQL's words and
// SQLite's.
type migration [2]string

// migrations are the schema's versions, the first being 1. A version is
// never changed once released: a change is a new one.
var migrations = []migration{
	schemaV1,
	{`
CREATE TABLE IF NOT EXISTS cordon_idempotency (
	agent   text NOT NULL,
	key     text NOT NULL,
	digest  text NOT NULL,
	node    text NOT NULL,
	state   text NOT NULL,
	answer  text NOT NULL,
	created timestamptz NOT NULL,
	PRIMARY KEY (agent, key)
);
CREATE INDEX IF NOT EXISTS cordon_idempotency_created ON cordon_idempotency (created);`, `
CREATE TABLE IF NOT EXISTS cordon_idempotency (
	agent   text NOT NULL,
	key     text NOT NULL,
	digest  text NOT NULL,
	node    text NOT NULL,
	state   text NOT NULL,
	answer  text NOT NULL,
	created integer NOT NULL, -- nanoseconds since 1970, UTC
	PRIMARY KEY (agent, key)
);
CREATE INDEX IF NOT EXISTS cordon_idempotency_created ON cordon_idempotency (created);`},
	{`
CREATE TABLE IF NOT EXISTS cordon_nodes (
	name        text PRIMARY KEY,
	incarnation text NOT NULL,
	advertise   text NOT NULL,
	state       text NOT NULL,
	started     timestamptz NOT NULL,
	heartbeat   timestamptz NOT NULL,
	load        jsonb NOT NULL
);`, `
CREATE TABLE IF NOT EXISTS cordon_nodes (
	name        text PRIMARY KEY,
	incarnation text NOT NULL,
	advertise   text NOT NULL,
	state       text NOT NULL,
	started     integer NOT NULL, -- nanoseconds since 1970, UTC
	heartbeat   integer NOT NULL, -- nanoseconds since 1970, UTC
	load        text NOT NULL
);`},
}

// schemaLock is the advisory lock that serializes migrations across the
// nodes sharing a PostgreSQL ("cordon schema").
const schemaLock = "SELECT pg_advisory_xact_lock(109330311704431)"

// migrate brings the database to the last version, in one transaction:
// under an advisory lock on PostgreSQL (nodes starting together on an
// empty database take turns, and the second finds the work done), under
// SQLite's write lock (its transactions begin IMMEDIATE). A database of a
// later version than this cordon knows is refused.
func (d *DB) migrate(ctx context.Context) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	defer tx.Rollback()
	if d.d.postgres {
		if _, err := tx.ExecContext(ctx, schemaLock); err != nil {
			return fmt.Errorf("schema: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS cordon_schema (version integer PRIMARY KEY)`); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM cordon_schema").Scan(&have); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if have > len(migrations) {
		return fmt.Errorf("schema: the database is at version %d, later than this cordon knows (%d): upgrade cordon", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		text := migrations[v-1][1]
		if d.d.postgres {
			text = migrations[v-1][0]
		}
		if _, err := tx.ExecContext(ctx, text); err != nil {
			return fmt.Errorf("schema: version %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, d.d.param("INSERT INTO cordon_schema (version) VALUES ($1)"), v); err != nil {
			return fmt.Errorf("schema: version %d: %w", v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

// Version is the schema's version in the database.
func (d *DB) Version(ctx context.Context) (int, error) {
	var v int
	err := d.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM cordon_schema").Scan(&v)
	return v, err
}
