package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The states of a node in cordon_nodes.
const (
	NodeAlive    = "alive"    // serving, taking new sandboxes
	NodeDraining = "draining" // serving its sandboxes, taking no new ones
	NodeLeft     = "left"     // stopped cleanly
	NodeDead     = "dead"     // silent past the timeout: declared dead by another node
	NodeLost     = "lost"     // dead, and its sandboxes recorded as ended (EndLost)
)

// Node is one cordon serve node as the registry holds it.
type Node struct {
	Name string
	// Incarnation tells one run of a node from the next: a node that
	// finds its row taken over by another incarnation is fenced.
	Incarnation string
	// Advertise is the URL the other nodes forward requests to.
	Advertise string
	State     string
	// Load is what the node last said of its sandboxes.
	Load Load
	// Age is how long ago, by the database's clock, it last beat.
	Age time.Duration
}

// Load is a node's sandboxes, per agent, as of its last heartbeat.
type Load struct {
	Agents map[string]AgentLoad `json:"agents"`
}

// AgentLoad is one agent's live sandboxes on a node, and its bound there.
type AgentLoad struct {
	Live int `json:"live"`
	Max  int `json:"max"`
}

// ErrNodeInUse is returned by Register when another incarnation of the
// same node name is alive.
var ErrNodeInUse = errors.New("the node name is in use by a live node")

// ErrFenced is returned by Heartbeat when the node's row no longer is its
// own: another node declared it dead, or another incarnation took the name.
var ErrFenced = errors.New("this node was declared dead or replaced")

// now is the database's clock in an expression of its dialect: on
// PostgreSQL, the server's, shared by every node; SQLite, which only
// nodes of one machine share, has this process's.
func (d *DB) now() string {
	if d.d.postgres {
		return "clock_timestamp()"
	}
	return strconv.FormatInt(time.Now().UnixNano(), 10)
}

// olderThan is a condition: column is more than the duration in
// parameter $n (milliseconds) before now.
func (d *DB) olderThan(column string, n int) string {
	if d.d.postgres {
		return fmt.Sprintf("%s < clock_timestamp() - ($%d::float8 * interval '1 millisecond')", column, n)
	}
	return fmt.Sprintf("%s < %s - ($%d * 1000000)", column, d.now(), n)
}

// age is an expression: how many milliseconds column is before now.
func (d *DB) age(column string) string {
	if d.d.postgres {
		return fmt.Sprintf("CAST(EXTRACT(EPOCH FROM (clock_timestamp() - %s)) * 1000 AS bigint)", column)
	}
	return fmt.Sprintf("((%s - %s) / 1000000)", d.now(), column)
}

// Register enters a node in the registry as alive: a new name, or one
// whose last incarnation stopped, was declared dead, or has been silent
// for longer than gone. A name another incarnation still beats for is
// refused (ErrNodeInUse): two nodes of one name would end each other's
// sandboxes.
func (d *DB) Register(ctx context.Context, n Node, gone time.Duration) error {
	load, err := json.Marshal(n.Load)
	if err != nil {
		return err
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	defer tx.Rollback()
	if d.d.postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(109330311704433)"); err != nil {
			return fmt.Errorf("nodes: lock: %w", err)
		}
	}
	var inc, state string
	var age int64
	err = tx.QueryRowContext(ctx, d.d.param("SELECT incarnation, state, "+d.age("heartbeat")+" FROM cordon_nodes WHERE name = $1"), n.Name).Scan(&inc, &state, &age)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("nodes: %w", err)
	case inc != n.Incarnation && (state == NodeAlive || state == NodeDraining) && time.Duration(age)*time.Millisecond < gone:
		return fmt.Errorf("%w: node %s beats (last %s ago); give each node its own name", ErrNodeInUse, n.Name, time.Duration(age)*time.Millisecond)
	}
	if _, err := tx.ExecContext(ctx, d.d.param(`INSERT INTO cordon_nodes (name, incarnation, advertise, state, started, heartbeat, load)
VALUES ($1, $2, $3, $4, `+d.now()+`, `+d.now()+`, $5)
ON CONFLICT (name) DO UPDATE SET incarnation = EXCLUDED.incarnation, advertise = EXCLUDED.advertise, state = EXCLUDED.state,
	started = EXCLUDED.started, heartbeat = EXCLUDED.heartbeat, load = EXCLUDED.load`), n.Name, n.Incarnation, n.Advertise, NodeAlive, string(load)); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	return nil
}

// Heartbeat says the node is alive and what it holds, and returns its
// state (alive, or draining when asked to drain). ErrFenced: its row is no
// longer its own.
func (d *DB) Heartbeat(ctx context.Context, name, incarnation string, load Load) (string, error) {
	data, err := json.Marshal(load)
	if err != nil {
		return "", err
	}
	tx, err := d.beats.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("nodes: heartbeat: %w", err)
	}
	defer tx.Rollback()
	if d.d.postgres {
		// A heartbeat need not survive the database's crash: it does not
		// wait for the disk, which a loaded database may take seconds to
		// give. (In the transaction: a pooler such as PgBouncer takes it.)
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit TO OFF"); err != nil {
			return "", fmt.Errorf("nodes: heartbeat: %w", err)
		}
	}
	var state string
	err = tx.QueryRowContext(ctx, d.d.param(`UPDATE cordon_nodes SET heartbeat = `+d.now()+`, load = $3
WHERE name = $1 AND incarnation = $2 AND state IN ('alive', 'draining') RETURNING state`), name, incarnation, string(data)).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrFenced
	}
	if err != nil {
		return "", fmt.Errorf("nodes: heartbeat: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("nodes: heartbeat: %w", err)
	}
	return state, nil
}

// Nodes returns every node of the registry, by name.
func (d *DB) Nodes(ctx context.Context) ([]Node, error) { return d.nodes(ctx, d.db, "") }

// BeatNodes is Nodes on the heartbeat's own connections.
func (d *DB) BeatNodes(ctx context.Context) ([]Node, error) { return d.nodes(ctx, d.beats, "") }

// nodes returns the nodes named name, or all of them when name is "".
func (d *DB) nodes(ctx context.Context, q *sql.DB, name string) ([]Node, error) {
	rows, err := q.QueryContext(ctx, d.d.param("SELECT name, incarnation, advertise, state, load, "+d.age("heartbeat")+" FROM cordon_nodes WHERE ($1 = '' OR name = $1) ORDER BY name"), name)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var load []byte
		var age int64
		if err := rows.Scan(&n.Name, &n.Incarnation, &n.Advertise, &n.State, &load, &age); err != nil {
			return nil, fmt.Errorf("nodes: %w", err)
		}
		json.Unmarshal(load, &n.Load) // a load it cannot read is none
		n.Age = time.Duration(age) * time.Millisecond
		out = append(out, n)
	}
	return out, rows.Err()
}

// NodeByName returns one node of the registry (ErrNotFound).
func (d *DB) NodeByName(ctx context.Context, name string) (Node, error) {
	if name == "" {
		return Node{}, ErrNotFound
	}
	nodes, err := d.nodes(ctx, d.db, name)
	if err != nil {
		return Node{}, err
	}
	if len(nodes) == 0 {
		return Node{}, ErrNotFound
	}
	return nodes[0], nil
}

// DeclareDead marks an incarnation of a node dead if it is still alive or
// draining and has not beaten for timeout. It reports whether this call
// did so: of the nodes that find it silent, one wins, and ends its
// sandboxes.
func (d *DB) DeclareDead(ctx context.Context, name, incarnation string, timeout time.Duration) (bool, error) {
	res, err := d.beats.ExecContext(ctx, d.d.param(`UPDATE cordon_nodes SET state = 'dead'
WHERE name = $1 AND incarnation = $2 AND state IN ('alive', 'draining') AND `+d.olderThan("heartbeat", 3)), name, incarnation, timeout.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SetNodeState moves a node of the given incarnation ("" for any) from
// one state to another; it reports whether the node was in from.
func (d *DB) SetNodeState(ctx context.Context, name, incarnation, from, to string) (bool, error) {
	res, err := d.exec(ctx, `UPDATE cordon_nodes SET state = $4 WHERE name = $1 AND ($2 = '' OR incarnation = $2) AND state = $3`, name, incarnation, from, to)
	if err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// EndLost records, in one transaction, the sessions of a node declared
// dead as ended (infos, by sandbox id), the idempotency keys it left
// running as of unknown outcome, and the node as lost, if the node's row
// is still that incarnation's, dead: a next run that took the name over since ends what
// the last one left itself (see Register), and its own sandboxes and keys
// are not the last run's. It reports whether it did.
func (d *DB) EndLost(ctx context.Context, name, incarnation string, infos map[string]any) (bool, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	defer tx.Rollback()
	if d.d.postgres {
		// Register's lock: no next run takes the name over meanwhile.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(109330311704433)"); err != nil {
			return false, fmt.Errorf("nodes: lock: %w", err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, d.d.param("SELECT COUNT(*) FROM cordon_nodes WHERE name = $1 AND incarnation = $2 AND state = $3"), name, incarnation, NodeDead).Scan(&n); err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	now := d.d.when(time.Now())
	for id, info := range infos {
		data, err := json.Marshal(info)
		if err != nil {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, d.d.param("UPDATE cordon_sandboxes SET info = $3, updated = $4 WHERE id = $1 AND node = $2"), id, name, string(data), now); err != nil {
			return false, fmt.Errorf("sessions: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, d.d.param("UPDATE cordon_idempotency SET state = $1 WHERE node = $2 AND state = $3"), KeyUnknown, name, KeyRunning); err != nil {
		return false, fmt.Errorf("idempotency keys: %w", err)
	}
	if _, err := tx.ExecContext(ctx, d.d.param("UPDATE cordon_nodes SET state = $3 WHERE name = $1 AND incarnation = $2"), name, incarnation, NodeLost); err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	return true, nil
}
