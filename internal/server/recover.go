package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// endedByRestart is why a sandbox of a node that stopped uncleanly ended.
const endedByRestart = "node_restarted"

// recovery is what a start found left by a node that did not stop
// cleanly, and what it did about it.
type recovery struct {
	Reindexed  int      `json:"reindexed"`
	Ended      []string `json:"ended,omitempty"`
	Workspaces []string `json:"workspaces,omitempty"`
	Unknown    int      `json:"idempotency_unknown,omitempty"`
}

// reindex sends the index the records of the audit log that it lacks:
// those a node killed outright wrote in its last moments, before its
// indexer ran. It returns the sandboxes those records started and did not
// end (their sessions may not have reached the database either).
func (s *Server) reindex(ctx context.Context, rec *recovery) (map[string]string, error) {
	seq, hash, err := s.opts.DB.LastIndexed(ctx, s.opts.Node)
	if err != nil {
		return nil, err
	}
	started := map[string]string{} // sandbox -> agent
	var batch []audit.Record
	send := func() error {
		if err := s.opts.DB.Index(ctx, s.opts.Node, batch); err != nil {
			return err
		}
		rec.Reindexed += len(batch)
		batch = batch[:0]
		return nil
	}
	err = audit.ReadAfter(s.opts.Audit.Path(), seq, hash, func(r audit.Record) error {
		switch r.Type {
		case "start":
			// Only this node's: other processes (cordon run, another
			// node) write the same log, and end their own.
			if startedBy(r) == s.opts.Node && validName(r.Sandbox) {
				started[r.Sandbox] = r.Agent
			}
		case "end":
			delete(started, r.Sandbox)
		}
		batch = append(batch, r)
		if len(batch) == 500 {
			return send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	if errors.Is(err, audit.ErrReplaced) {
		return nil, fmt.Errorf("re-indexing the audit log's tail: %w; the log at %s is not the one this node's database indexed (replaced, restored from elsewhere, or begun afresh by another user's cordon at the same path): give this server a log of its own (cordon serve --audit-log, or audit.log in cordon's configuration), or the database that indexed this log (database: in its configuration); cordon audit verify checks the log itself", err, s.opts.Audit.Path())
	}
	if err != nil {
		return nil, fmt.Errorf("re-indexing the audit log's tail: %w", err)
	}
	return started, nil
}

// startedBy is the node a start record names ("" when none does).
func startedBy(r audit.Record) string {
	if m, ok := r.Data.(map[string]any); ok {
		node, _ := m["node"].(string)
		return node
	}
	return ""
}

// unended returns the sessions whose sandbox has not ended, each as its
// node last described it (by its id and agent alone when the description
// cannot be read), by id.
func unended(sessions []statedb.Session) []api.Sandbox {
	var out []api.Sandbox
	for _, sess := range sessions {
		var sb api.Sandbox
		if json.Unmarshal(sess.Info, &sb) != nil {
			sb = api.Sandbox{}
		}
		if sb.State != "ended" {
			sb.ID, sb.Agent = sess.ID, sess.Agent
			out = append(out, sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// endLeftovers ends what this node left running when it stopped
// uncleanly: the sessions it owned in the database that are not ended,
// and the sandboxes the log's tail started and did not end, are recorded
// as ended (node_restarted) and marked so in the database; their private
// workspaces go, as does every workspace left under the state directory
// when no other server uses it.
func (s *Server) endLeftovers(ctx context.Context, started map[string]string, rec *recovery) error {
	sessions, err := s.opts.DB.NodeSessions(ctx, s.opts.Node)
	if err != nil {
		return err
	}
	stale := map[string]api.Sandbox{}
	for _, sb := range unended(sessions) {
		stale[sb.ID] = sb
	}
	for _, sess := range sessions {
		delete(started, sess.ID)
	}
	for id, agent := range started {
		stale[id] = api.Sandbox{ID: id, Agent: agent}
	}
	ids := make([]string, 0, len(stale))
	for id := range stale {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.event(audit.Event{Sandbox: id, Agent: stale[id].Agent, Kind: audit.Decision, Type: "end", Data: map[string]any{"reason": endedByRestart}})
	}
	if len(ids) > 0 {
		// On the disk before the database says they ended.
		if err := s.auditWritten(s.opts.Audit.Flush()); err != nil {
			return fmt.Errorf("recording the end of the sandboxes left running: %w", err)
		}
	}
	for _, id := range ids {
		sb := stale[id]
		sb.ID, sb.Node, sb.State, sb.Ended, sb.Running = id, s.opts.Node, "ended", endedByRestart, 0
		if err := s.opts.DB.PutSession(ctx, id, s.opts.Node, sb.Agent, sb); err != nil {
			return err
		}
		s.metrics.ended(sb.Agent, endedByRestart)
	}
	rec.Ended = ids
	if s.opts.StateDir == "" {
		return nil
	}
	dir := filepath.Join(s.opts.StateDir, "sandboxes")
	var gone []string
	if s.stateLock != nil {
		// No other server uses the state directory: whatever is under
		// sandboxes/ was left by this one.
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			gone = append(gone, e.Name())
		}
	} else {
		gone = ids
	}
	for _, name := range gone {
		if !validName(name) || name != filepath.Base(name) {
			continue // never a path: an id is a plain name
		}
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("removing a workspace left behind: %w", err)
		}
		rec.Workspaces = append(rec.Workspaces, name)
	}
	return nil
}

// lockState takes the state directory's lock for the server's life: a
// second server on the same directory runs, but leaves the first one's
// workspaces alone.
func (s *Server) lockState() error {
	if s.opts.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(s.opts.StateDir, 0o711); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.opts.StateDir, "serve.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			s.logf("another cordon serve uses %s: only this node's own leftovers are removed at start", s.opts.StateDir)
			return nil
		}
		return fmt.Errorf("state directory lock: %w", err)
	}
	s.stateLock = f
	return nil
}

// recoverAtStart cleans up after a node of this name that did not stop
// cleanly (kill -9, a crash, a power cut), before the server writes
// anything: the index gets the log's tail it lacks, the sandboxes it left
// are ended, their workspaces removed, and the commands it left running
// under idempotency keys are marked unknown. What was done is logged and
// recorded (node_recovered).
func (s *Server) recoverAtStart() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rec recovery
	started, err := s.reindex(ctx, &rec)
	if err != nil {
		return err
	}
	s.opts.Audit.OnWrite(s.queueIndex)
	if err := s.lockState(); err != nil {
		return err
	}
	if err := s.endLeftovers(ctx, started, &rec); err != nil {
		return fmt.Errorf("ending what a stop left behind: %w", err)
	}
	if rec.Unknown, err = s.opts.DB.IdempotencyUnknown(ctx, s.opts.Node); err != nil {
		return err
	}
	if rec.Reindexed == 0 && len(rec.Ended) == 0 && len(rec.Workspaces) == 0 && rec.Unknown == 0 {
		return nil
	}
	s.logf("recovered from a stop that was not clean: %d audit records re-indexed; %d sandboxes ended (%s)%s; %d workspaces removed; %d commands under idempotency keys marked unknown",
		rec.Reindexed, len(rec.Ended), endedByRestart, list(rec.Ended), len(rec.Workspaces), rec.Unknown)
	s.event(audit.Event{Kind: audit.Decision, Type: "node_recovered", Data: rec})
	if err := s.auditWritten(s.opts.Audit.Flush()); err != nil {
		return fmt.Errorf("recording the recovery: %w", err)
	}
	return nil
}

func list(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ": " + strings.Join(ids, ", ")
}
