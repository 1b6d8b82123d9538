package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// keyed sends a request with an idempotency key and returns the status,
// the body and whether it was replayed.
func (f *fixture) keyed(t *testing.T, token, method, path, key, body string) (int, string, bool) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.tokens[token])
	if key != "" {
		req.Header.Set(KeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A command sent again with its idempotency key is not run again: the
// kept outcome comes back, with the output's size and digest; the key
// with another request is refused, and while the first runs, the second
// is told to wait.
func TestIdempotentExec(t *testing.T) {
	var ran atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	f := newFixture(t, 0, nil, func(args []string) outcome.Outcome {
		ran.Add(1)
		if args[0] == "wait" {
			<-release
		}
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code, Message: "ran " + args[0]}
	})
	// Cleanups run last first: the command is let go before the server
	// closes.
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	ctx := context.Background()
	sb, err := f.client("alice-a").Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	path := api.Version + "/sandboxes/" + sb.ID + "/exec"
	status, body, replayed := f.keyed(t, "alice-a", "POST", path, "k-1", `{"args":["one"]}`)
	var first api.ExecResult
	json.Unmarshal([]byte(body), &first)
	if status != 200 || replayed || ran.Load() != 1 || first.Replay != nil {
		t.Fatalf("the first request: %d %s", status, body)
	}
	status, body, replayed = f.keyed(t, "alice-a", "POST", path, "k-1", `{"args":["one"]}`)
	var again api.ExecResult
	json.Unmarshal([]byte(body), &again)
	if status != 200 || !replayed || ran.Load() != 1 || again.Outcome.Message != "ran one" || again.Replay == nil ||
		again.Replay.StdoutSHA256 != sha(string(first.Stdout)) || again.Replay.StdoutBytes != int64(len(first.Stdout)) || len(again.Stdout) != 0 {
		t.Fatalf("sent again: %d %s (ran %d)", status, body, ran.Load())
	}
	if status, body, _ := f.keyed(t, "alice-a", "POST", path, "k-1", `{"args":["two"]}`); status != 422 {
		t.Fatalf("the key with another request: %d %s", status, body)
	}
	// Another agent's key space is its own.
	if status, _, _ := f.keyed(t, "bob-b", "POST", path, "k-1", `{"args":["one"]}`); status != 404 {
		t.Fatalf("another agent's request with the key: %d", status)
	}
	for _, bad := range []string{strings.Repeat("k", maxKey+1), "k k"} {
		if status, body, _ := f.keyed(t, "alice-a", "POST", path, bad, `{"args":["one"]}`); status != 400 {
			t.Fatalf("key %q: %d %s", bad, status, body)
		}
	}
	// Streamed: the kept outcome comes back as the one line.
	status, body, _ = f.keyed(t, "alice-a", "POST", path, "k-s", `{"args":["s"],"stream":true}`)
	status2, body2, replayed := f.keyed(t, "alice-a", "POST", path, "k-s", `{"args":["s"],"stream":true}`)
	var ev api.ExecEvent
	json.Unmarshal([]byte(body2), &ev)
	if status != 200 || status2 != 200 || !replayed || ev.Outcome == nil || ev.Outcome.Message != "ran s" || ev.Replay == nil || ev.Replay.StdoutBytes == 0 || ran.Load() != 2 {
		t.Fatalf("a streamed command sent again: %d %s / %d %s", status, body, status2, body2)
	}

	// While the first runs.
	done := make(chan int, 1)
	go func() {
		status, _, _ := f.keyed(t, "alice-a", "POST", path, "k-2", `{"args":["wait"]}`)
		done <- status
	}()
	waitFor(t, "the command to run", func() bool { got, _ := f.client("alice-a").Get(ctx, sb.ID); return got.Running == 1 })
	if status, body, _ := f.keyed(t, "alice-a", "POST", path, "k-2", `{"args":["wait"]}`); status != 409 {
		t.Fatalf("sent again while it runs: %d %s", status, body)
	}
	once.Do(func() { close(release) })
	if status := <-done; status != 200 {
		t.Fatalf("the first: %d", status)
	}
	if status, _, replayed := f.keyed(t, "alice-a", "POST", path, "k-2", `{"args":["wait"]}`); status != 200 || !replayed {
		t.Fatalf("sent again after it answered: %d", status)
	}

	// A request refused before it did anything leaves its key free.
	os.Rename(f.log, f.log+".saved")
	os.Mkdir(f.log, 0o700)
	if status, body, _ := f.keyed(t, "alice-a", "POST", path, "k-3", `{"args":["three"]}`); status != 500 || !strings.Contains(body, "not run") {
		t.Fatalf("with no audit log: %d %s", status, body)
	}
	os.Remove(f.log)
	os.Rename(f.log+".saved", f.log)
	n := ran.Load()
	if status, body, replayed := f.keyed(t, "alice-a", "POST", path, "k-3", `{"args":["three"]}`); status != 200 || replayed || ran.Load() != n+1 {
		t.Fatalf("sent again once the log is back: %d %s", status, body)
	}

	// Kept for a day, then forgotten.
	if _, err := f.srv.opts.DB.PruneKeys(ctx, time.Now().Add(keyKeep)); err != nil {
		t.Fatal(err)
	}
	if status, _, replayed := f.keyed(t, "alice-a", "POST", path, "k-1", `{"args":["one"]}`); status != 200 || replayed {
		t.Fatalf("a pruned key: %d %v", status, replayed)
	}
}

// A create sent again with its key gives the same sandbox, built once; a
// request whose node stopped while it ran is answered 410, unknown.
func TestIdempotentCreate(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	f := newFixture(t, 0, nil, func(args []string) outcome.Outcome {
		if args[0] == "wait" {
			<-release
		}
		return outcome.Outcome{Status: outcome.OK}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	path := api.Version + "/sandboxes"
	status, body, _ := f.keyed(t, "alice-a", "POST", path, "c-1", `{"exec":{"args":["first"]}}`)
	var first api.Sandbox
	json.Unmarshal([]byte(body), &first)
	status2, body2, replayed := f.keyed(t, "alice-a", "POST", path, "c-1", `{"exec":{"args":["first"]}}`)
	var again api.Sandbox
	json.Unmarshal([]byte(body2), &again)
	if status != 201 || status2 != 201 || !replayed || again.ID != first.ID || f.builds.Load() != 1 ||
		again.Result == nil || again.Result.Replay == nil || again.Result.Replay.StdoutSHA256 != sha(string(first.Result.Stdout)) {
		t.Fatalf("a create sent again: %d %s / %d %s", status, body, status2, body2)
	}
	// A node that stopped while the request ran marks it unknown at its
	// next start (here, while it runs).
	ctx := context.Background()
	done := make(chan int, 1)
	go func() {
		status, _, _ := f.keyed(t, "alice-a", "POST", path, "c-2", `{"exec":{"args":["wait"]}}`)
		done <- status
	}()
	waitFor(t, "the command to run", func() bool {
		list, _ := f.client("alice-a").List(ctx)
		return len(list) == 2 && (list[0].Running+list[1].Running) == 1
	})
	if n, err := f.srv.opts.DB.IdempotencyUnknown(ctx, f.srv.opts.Node); n != 1 || err != nil {
		t.Fatalf("marking unknown: %d %v", n, err)
	}
	status, body, _ = f.keyed(t, "alice-a", "POST", path, "c-2", `{"exec":{"args":["wait"]}}`)
	if status != 410 || !strings.Contains(body, "its outcome is unknown") {
		t.Fatalf("a request whose node stopped: %d %s", status, body)
	}
	once.Do(func() { close(release) })
	<-done
}
