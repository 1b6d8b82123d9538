package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// lastLine returns the number of records of the log at path and the hash
// of its last.
func logHead(t *testing.T, path string) (int64, string) {
	t.Helper()
	var n int64
	var hash string
	if err := audit.ReadAfter(path, 0, "", func(r audit.Record) error { n, hash = n+1, r.Hash; return nil }); err != nil {
		t.Fatal(err)
	}
	return n, hash
}

// A node started again after it was killed outright finds what it left:
// the index gets the log's tail it lacked, the sandboxes it left running
// (in the database, or only in the log's tail) are ended and recorded so,
// every workspace left under the state directory goes, the commands left
// running under idempotency keys become unknown, and it says so.
func TestRecoverAfterUncleanStop(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	var db *statedb.DB
	var logPath string
	var out syncBuffer
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Node, o.StateDir, o.Log = "n1", state, &out
		db, logPath = o.DB, o.Audit.Path()
		// What the killed node left: records, the first of them indexed.
		old := []audit.Event{
			{Sandbox: "sb-old", Agent: "a", Kind: audit.Decision, Type: "start"},
			{Sandbox: "sb-done", Agent: "a", Kind: audit.Decision, Type: "start"},
			{Sandbox: "sb-done", Agent: "a", Kind: audit.Decision, Type: "end"},
		}
		if err := o.Audit.Append(old...); err != nil {
			t.Fatal(err)
		}
		var recs []audit.Record
		audit.ReadAfter(logPath, 0, "", func(r audit.Record) error { recs = append(recs, r); return nil })
		if err := db.Index(ctx, "n1", recs); err != nil {
			t.Fatal(err)
		}
		// ... and the tail its indexer never sent.
		if err := o.Audit.Append(
			audit.Event{Sandbox: "sb-tail", Agent: "b", Kind: audit.Decision, Type: "start", Data: map[string]any{"node": "n1"}},
			audit.Event{Sandbox: "sb-tail", Agent: "b", Kind: audit.Action, Type: "exec"},
			audit.Event{Sandbox: "sb-old", Agent: "a", Kind: audit.Action, Type: "exec"},
		); err != nil {
			t.Fatal(err)
		}
		db.PutSession(ctx, "sb-old", "n1", "a", api.Sandbox{ID: "sb-old", Agent: "a", State: "running"})
		db.PutSession(ctx, "sb-done", "n1", "a", api.Sandbox{ID: "sb-done", Agent: "a", State: "ended", Ended: "killed"})
		db.PutSession(ctx, "sb-other", "n2", "a", api.Sandbox{ID: "sb-other", Agent: "a", State: "running"})
		if _, _, err := db.BeginKey(ctx, "a", "k1", "d1", "n1", time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"sb-old", "sb-tail", "sb-pooled"} {
			if err := os.MkdirAll(filepath.Join(state, "sandboxes", id, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := f.srv.index(); err != nil {
		t.Fatal(err)
	}
	n, hash := logHead(t, logPath)
	indexed, err := db.CountIndexed(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	_, lastHash, _ := db.LastIndexed(ctx, "n1")
	if indexed != n || lastHash != hash {
		t.Fatalf("the index holds %d records up to %s; the log %d up to %s", indexed, lastHash, n, hash)
	}
	sessions, err := db.NodeSessions(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	ended := map[string]string{}
	for _, s := range sessions {
		var sb api.Sandbox
		json.Unmarshal(s.Info, &sb)
		ended[s.ID] = sb.State + "/" + sb.Ended
	}
	want := map[string]string{"sb-old": "ended/node_restarted", "sb-tail": "ended/node_restarted", "sb-done": "ended/killed"}
	for id, w := range want {
		if ended[id] != w {
			t.Errorf("session %s: %q, want %q", id, ended[id], w)
		}
	}
	if other, _ := db.SessionByID(ctx, "sb-other"); !strings.Contains(string(other.Info), `"running"`) {
		t.Errorf("another node's session was touched: %s", other.Info)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "sandboxes")); len(ents) != 0 {
		t.Errorf("workspaces left: %v", ents)
	}
	if e, fresh, _ := db.BeginKey(ctx, "a", "k1", "d1", "n1", time.Hour); fresh || e.State != statedb.KeyUnknown {
		t.Errorf("the key left running: %+v", e)
	}
	var ends []string
	audit.ReadAfter(logPath, 0, "", func(r audit.Record) error {
		if r.Type == "end" && strings.Contains(string(must(json.Marshal(r.Data))), endedByRestart) {
			ends = append(ends, r.Sandbox)
		}
		return nil
	})
	if strings.Join(ends, " ") != "sb-old sb-tail" {
		t.Errorf("end records: %v", ends)
	}
	if !strings.Contains(out.String(), "recovered from a stop that was not clean: 3 audit records re-indexed; 2 sandboxes ended (node_restarted): sb-old, sb-tail; 3 workspaces removed; 1 commands") {
		t.Errorf("the server's output: %s", out.String())
	}
	// A clean start after it finds nothing to do.
	before := out.String()
	f.srv.Close()
	again, err := New(f.srv.opts)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if strings.Count(out.String(), "recovered") != strings.Count(before, "recovered") {
		t.Errorf("a clean start recovered: %s", out.String())
	}
}

// syncBuffer is a buffer several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A log that is not the one the database indexed (another user's cordon
// began its own at the same path) stops the start with what to do.
func TestReindexOfAnotherLogSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	var db *statedb.DB
	var logPath string
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Node = "n1"
		db, logPath = o.DB, o.Audit.Path()
	})
	if err := f.srv.opts.Audit.Append(audit.Event{Sandbox: "sb-x", Agent: "a", Kind: audit.Decision, Type: "start"}); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.index(); err != nil {
		t.Fatal(err)
	}
	// The index says the last record it has is another one.
	var recs []audit.Record
	audit.ReadAfter(logPath, 0, "", func(r audit.Record) error { recs = append(recs, r); return nil })
	other := recs[len(recs)-1]
	other.Seq++
	other.Hash = strings.Repeat("0", len(other.Hash))
	if err := db.Index(ctx, "n1", []audit.Record{other}); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.opts.Audit.Append(audit.Event{Sandbox: "sb-y", Agent: "a", Kind: audit.Decision, Type: "start"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.srv.reindex(ctx, &recovery{})
	if !errors.Is(err, audit.ErrReplaced) || !strings.Contains(err.Error(), "give this server a log of its own (cordon serve --audit-log") {
		t.Fatalf("re-indexing another log: %v", err)
	}
}
