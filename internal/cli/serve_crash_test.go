package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// keyedExec sends a command with an idempotency key; it returns the
// status and the body, or an error when no answer came.
func (s *served) keyedExec(id, key, body string) (int, []byte, error) {
	req, _ := http.NewRequest("POST", s.url+api.Version+"/sandboxes/"+id+"/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.tokens["builder"])
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// restart starts the server s was again, on the same configuration,
// state, database and audit log.
func (s *served) restart(t *testing.T) {
	t.Helper()
	cmd := exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	cmd.Env, cmd.Dir = s.cmd.Env, s.cmd.Dir
	s.log = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	waitUntil(t, "cordon serve to answer again", func() bool { _, err := s.client("ops").Health(context.Background()); return err == nil })
}

// TestServeCrash kills cordon serve (SIGKILL) while commands sent with
// idempotency keys run, and starts it again: nothing it left remains (its
// sessions are ended, its workspaces, processes and cgroups gone), the
// index holds exactly the log's records, the log verifies, and every
// command that was answered before the kill is answered again, from its
// key, with the same outcome and output digest, without running again.
func TestServeCrash(t *testing.T) {
	s := startServeWith(t, "  builder:\n    profile: builder.yaml\n    pool: 1\n", map[string]string{
		"builder.yaml": testProfile("builder", "  wall: 1m\n"),
	}, "node: crash-node\naudit_sync: 50ms\n", nil)
	ctx := context.Background()
	c := s.client("builder")
	var ids []string
	for range 3 {
		sb, err := c.Create(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	type acked struct {
		id, key, body string
		status        int
		answer        api.ExecResult
	}
	var (
		mu      sync.Mutex
		acks    []acked
		sent    []acked
		count   atomic.Int64
		killed  = make(chan struct{})
		killOne sync.Once
		before  []os.DirEntry // the workspaces at the kill
	)
	wsDir := filepath.Join(s.dir, "state", "serve", "sandboxes")
	oldPid := s.cmd.Process.Pid
	kids := children(oldPid)
	var wg sync.WaitGroup
	for w, id := range ids {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				body := fmt.Sprintf(`{"args":["sh","-c","echo %s; echo %s >> log.txt"]}`, key, key)
				mu.Lock()
				sent = append(sent, acked{id: id, key: key, body: body})
				mu.Unlock()
				status, b, err := s.keyedExec(id, key, body)
				if err != nil {
					return // the server is gone
				}
				var res api.ExecResult
				json.Unmarshal(b, &res)
				mu.Lock()
				acks = append(acks, acked{id, key, body, status, res})
				mu.Unlock()
				if count.Add(1) == 30 {
					killOne.Do(func() {
						before, _ = os.ReadDir(wsDir)
						s.cmd.Process.Kill()
						close(killed)
					})
				}
				select {
				case <-killed:
					return
				default:
				}
			}
		})
	}
	wg.Wait()
	<-killed
	s.cmd.Wait()
	if len(acks) < 30 {
		t.Fatalf("only %d commands answered before the kill", len(acks))
	}
	s.restart(t)

	// Nothing stale: processes, cgroups and workspaces gone (the new
	// server's pool has a workspace of its own).
	if len(before) < 4 {
		t.Fatalf("workspaces at the kill: %v", before)
	}
	for _, e := range before {
		if _, err := os.Stat(filepath.Join(wsDir, e.Name())); err == nil {
			t.Errorf("workspace %s is still there", e.Name())
		}
	}
	waitUntil(t, "the killed server's processes and cgroups to go", func() bool {
		for _, l := range s.leftoversOf(oldPid, kids) {
			if !strings.HasPrefix(l, "workspace ") {
				return false
			}
		}
		return true
	})
	if !strings.Contains(s.log.String(), "recovered from a stop that was not clean") {
		t.Errorf("the restarted server's output:\n%s", s.log)
	}

	// Every answered command is answered again from its key, as it was,
	// without running again; unanswered ones are answered, unknown, or
	// were never received: none runs now.
	for _, a := range acks {
		status, b, err := s.keyedExec(a.id, a.key, a.body)
		var res api.ExecResult
		json.Unmarshal(b, &res)
		sum := sha256.Sum256(a.answer.Stdout)
		if err != nil || status != a.status || res.Replay == nil || res.Outcome.Status != a.answer.Outcome.Status ||
			res.Replay.StdoutSHA256 != hex.EncodeToString(sum[:]) || string(a.answer.Stdout) != a.key+"\n" {
			t.Errorf("command %s answered %d %s before the kill, %d %s after (%v)", a.key, a.status, a.answer.Stdout, status, b, err)
		}
	}
	answered := map[string]bool{}
	for _, a := range acks {
		answered[a.key] = true
	}
	for _, a := range sent {
		if answered[a.key] {
			continue
		}
		status, b, err := s.keyedExec(a.id, a.key, a.body)
		if err != nil || (status != 200 && status != 410 && status != 404) {
			t.Errorf("unanswered command %s after the restart: %d %s %v", a.key, status, b, err)
		}
	}
	s.stop(t)

	// The index holds exactly the log's records; the log verifies.
	logPath := filepath.Join(s.dir, "audit", "audit.jsonl")
	var n int64
	var last string
	if err := audit.ReadAfter(logPath, 0, "", func(r audit.Record) error { n, last = n+1, r.Hash; return nil }); err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(ctx, filepath.Join(s.dir, "state", "serve", "db", "cordon.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	indexed, err := db.CountIndexed(ctx, "crash-node")
	if err != nil {
		t.Fatal(err)
	}
	_, lastIndexed, _ := db.LastIndexed(ctx, "crash-node")
	if indexed != n || lastIndexed != last {
		t.Errorf("the index holds %d records up to %s; the log %d up to %s", indexed, lastIndexed, n, last)
	}
	sessions, err := db.NodeSessions(ctx, "crash-node")
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range sessions {
		var sb api.Sandbox
		json.Unmarshal(sess.Info, &sb)
		if sb.State != "ended" {
			t.Errorf("session %s left %s", sess.ID, sb.State)
		}
	}
	if out, err := exec.Command(filepath.Join(binDir, "cordon"), "audit", "verify", "--log", logPath).CombinedOutput(); err != nil {
		t.Errorf("cordon audit verify: %v\n%s", err, out)
	}
	if left := s.leftovers(nil); len(left) > 0 {
		t.Errorf("left after the clean stop: %v", left)
	}
}

// leftoversOf is leftovers for the server that ran as pid.
func (s *served) leftoversOf(pid int, kids []int) []string {
	cur := s.cmd
	s.cmd = &exec.Cmd{Process: &os.Process{Pid: pid}}
	defer func() { s.cmd = cur }()
	return s.leftovers(kids)
}
