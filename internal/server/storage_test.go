package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
)

// health asks the fixture's server for its health.
func (f *fixture) health(t *testing.T) api.Health {
	t.Helper()
	h, err := f.client("ops").Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func hasReason(h api.Health, reason string) bool {
	for _, r := range h.Reasons {
		if r.Reason == reason {
			return true
		}
	}
	return false
}

// logTypes returns the types of the records in the audit log at path.
func logTypes(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, r.Type)
	}
	return out
}

// Every state-changing request is refused, and changes nothing, while the
// audit log cannot be written; /v1/health, the metrics and the server's
// log say so; once the log can be written again, the chain says how many
// records were lost meanwhile instead of hiding the gap.
func TestStateChangesRefusedUnrecorded(t *testing.T) {
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	var logMu = make(chan struct{}, 1)
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Approvals = store
		o.Log = writerFunc(func(p []byte) (int, error) {
			logMu <- struct{}{}
			defer func() { <-logMu }()
			return logged.Write(p)
		})
	})
	ctx := context.Background()
	a, admin := f.client("alice-a"), f.client("ops")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if h := f.health(t); h.Status != "ok" || len(h.Reasons) != 0 {
		t.Fatalf("health before: %+v", h)
	}
	id, err := store.Add(approvals.Request{Tool: "pay", Args: json.RawMessage(`{}`), Class: "financial", Agent: "a", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}

	// The log's file becomes a directory: nothing can be written.
	if err := os.Rename(f.log, f.log+".saved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.log, 0o700); err != nil {
		t.Fatal(err)
	}
	builds := f.builds.Load()
	if _, err := a.Create(ctx, ""); !client.IsStatus(err, 503) || !strings.Contains(err.Error(), "could not be recorded") {
		t.Fatalf("a create with no audit log: %v", err)
	}
	f.mu.Lock()
	for id, b := range f.boxes {
		if id != sb.ID && !b.closed {
			t.Errorf("the refused create left sandbox %s running", id)
		}
	}
	f.mu.Unlock()
	if f.builds.Load() != builds+1 {
		t.Fatalf("builds: %d, want %d", f.builds.Load(), builds+1)
	}
	if list, _ := a.List(ctx); len(list) != 2 || (list[0].State == "running") == (list[1].State == "running") {
		t.Fatalf("after the refused create: %+v", list)
	}
	if _, err := a.Kill(ctx, sb.ID); !client.IsStatus(err, 503) {
		t.Fatalf("a kill with no audit log: %v", err)
	}
	if got, _ := a.Get(ctx, sb.ID); got.State != "running" {
		t.Fatalf("the refused kill ended the sandbox: %+v", got)
	}
	if _, err := a.KeepAlive(ctx, sb.ID); !client.IsStatus(err, 503) {
		t.Fatalf("a keep-alive with no audit log: %v", err)
	}
	if _, err := admin.Decide(ctx, id, true, api.Decision{Reason: "ok"}); !client.IsStatus(err, 503) {
		t.Fatalf("a decision with no audit log: %v", err)
	}
	if it, _ := store.Get(id); it.State != approvals.Pending {
		t.Fatalf("the refused decision was taken: %+v", it)
	}
	if h := f.health(t); h.Status != "degraded" || !hasReason(h, reasonAudit) {
		t.Fatalf("health with no audit log: %+v", h)
	}
	if m := f.metrics(t); !strings.Contains(m, `cordon_health_degraded{reason="audit_log"} 1`) || !strings.Contains(m, `cordon_health_degraded{reason="database"} 0`) {
		t.Fatalf("metrics with no audit log:\n%s", m)
	}
	waitFor(t, "the log line", func() bool {
		logMu <- struct{}{}
		defer func() { <-logMu }()
		return strings.Contains(logged.String(), "health: degraded: audit_log")
	})

	// The log comes back: the server finds out by itself, and the chain
	// counts what it lost.
	if err := os.Remove(f.log); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.log+".saved", f.log); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "health ok again", func() bool { return f.health(t).Status == "ok" })
	if _, err := a.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	types := strings.Join(logTypes(t, f.log), " ")
	if !strings.Contains(types, "records_lost") || strings.Contains(types, "approval_decision") || strings.Contains(types, "recovered") {
		t.Fatalf("the log after the gap: %s", types)
	}
	// The kill's own request record may follow its answer.
	if !strings.HasSuffix(strings.TrimSuffix(types, " api_request"), "kill end") {
		t.Fatalf("the kill's records: %s", types)
	}
}

// A database that refuses the index, or does not answer, makes the
// server degraded until it takes the index again.
func TestHealthDatabase(t *testing.T) {
	var dbFile string
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) { dbFile = o.DB.Name() })
	ctx := context.Background()
	raw, err := sql.Open("sqlite3", dbFile)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("ALTER TABLE cordon_audit RENAME TO cordon_audit_away"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client("alice-a").Create(ctx, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "health degraded", func() bool { return hasReason(f.health(t), reasonDatabase) })
	if m := f.metrics(t); !strings.Contains(m, `cordon_health_degraded{reason="database"} 1`) {
		t.Fatalf("metrics with the index refused:\n%s", m)
	}
	if _, err := raw.Exec("ALTER TABLE cordon_audit_away RENAME TO cordon_audit"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "health ok again", func() bool { return f.health(t).Status == "ok" })
	// Closed: it no longer answers a ping.
	f.srv.opts.DB.Close()
	waitFor(t, "health degraded", func() bool { return hasReason(f.health(t), reasonDatabase) })
}

// A build that fails makes the server degraded until one succeeds.
func TestHealthBuilds(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	f.srv.built("a", os.ErrPermission)
	if h := f.health(t); !hasReason(h, reasonBuilds) || !strings.Contains(h.Reasons[0].Detail, "a (permission denied)") {
		t.Fatalf("health with a failing build: %+v", h)
	}
	if _, err := f.client("alice-a").Create(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if h := f.health(t); h.Status != "ok" {
		t.Fatalf("health after a good build: %+v", h)
	}
}

// On a full disk, a create is refused and leaves nothing running; the
// free space under the audit log is reported.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("no tmpfs to fill: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	logPath := filepath.Join(dir, "audit.jsonl")
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		al, err := audit.Open(logPath, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.Audit = al
	})
	f.log = logPath
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fill, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for range 1024 {
		if _, err := fill.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	fill.Close()
	if h := f.health(t); !hasReason(h, reasonDisk) {
		t.Fatalf("health on a full disk: %+v", h)
	}
	// The log's last page may still take a few records.
	for i := 0; ; i++ {
		_, err := a.KeepAlive(ctx, sb.ID)
		if client.IsStatus(err, 503) {
			break
		}
		if err != nil || i == 100 {
			t.Fatalf("keep-alives on a full disk: %v (%d)", err, i)
		}
	}
	if _, err := a.Create(ctx, ""); !client.IsStatus(err, 503) {
		t.Fatalf("a create on a full disk: %v", err)
	}
	if _, err := a.Kill(ctx, sb.ID); !client.IsStatus(err, 503) {
		t.Fatalf("a kill on a full disk: %v", err)
	}
	os.Remove(filler)
	if _, err := a.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	types := strings.Join(logTypes(t, f.log), " ")
	if !strings.Contains(types, "records_lost") || strings.Contains(types, "recovered") || !strings.HasSuffix(types, "kill end") {
		t.Fatalf("the log after the full disk: %s", types)
	}
}
