package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// KeyHeader names a request's idempotency key.
const KeyHeader = "Idempotency-Key"

// Bounds of what is kept of a request under an idempotency key.
const (
	// keyKeep is how long a key's answer is kept.
	keyKeep = 24 * time.Hour
	// maxKey is the longest key.
	maxKey = 255
	// maxKept is the largest answer kept (the output is never kept).
	maxKept = 64 << 10
)

// replayNote says what a replayed answer lacks.
const replayNote = "the kept answer of an earlier request with this idempotency key: the outcome is as it was; the output is not kept, only its size and SHA-256"

// keyed is a request under an idempotency key, from when the key is
// filed until its answer is kept (or the key released).
type keyed struct {
	s          *Server
	agent, key string
	started    atomic.Bool
}

type startedKey struct{}

// markStarted notes that the request of ctx did something: its answer,
// whatever it is, is kept from now on.
func markStarted(ctx context.Context) {
	if k, ok := ctx.Value(startedKey{}).(*keyed); ok {
		k.started.Store(true)
	}
}

// keptAnswer is an answer as kept.
type keptAnswer struct {
	Status int             `json:"status"`
	Stream bool            `json:"stream,omitempty"`
	Body   json.RawMessage `json:"body"`
}

// beginKey files the request's idempotency key, when it has one, for the
// request what (its kind and target) with the body req. It returns the
// keyed request and the context the request runs in; or, when the key was
// filed before, answers (the kept answer, 409 while it runs, 410 when its
// node stopped while it ran, 422 for another request) and returns the
// status.
func (s *Server) beginKey(w http.ResponseWriter, r *http.Request, c caller, what string, req any) (*keyed, context.Context, int) {
	key := r.Header.Get(KeyHeader)
	if key == "" {
		return nil, r.Context(), 0
	}
	if len(key) > maxKey {
		return nil, nil, fail(w, http.StatusBadRequest, "%s: at most %d characters", KeyHeader, maxKey)
	}
	for _, ch := range []byte(key) {
		if ch < 0x21 || ch > 0x7e {
			return nil, nil, fail(w, http.StatusBadRequest, "%s: visible ASCII characters only", KeyHeader)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fail(w, http.StatusBadRequest, "%v", err)
	}
	sum := sha256.Sum256(append([]byte(what+"\n"), body...))
	digest := hex.EncodeToString(sum[:])
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	e, fresh, err := s.opts.DB.BeginKey(ctx, c.token.Agent, key, digest, s.opts.Node, keyKeep)
	if err != nil {
		s.logf("%v", err)
		w.Header().Set("Retry-After", "10")
		return nil, nil, fail(w, http.StatusServiceUnavailable, "the idempotency key cannot be kept now (%v); nothing was done", err)
	}
	if fresh {
		k := &keyed{s: s, agent: c.token.Agent, key: key}
		return k, context.WithValue(r.Context(), startedKey{}, k), 0
	}
	switch {
	case e.Digest != digest:
		return nil, nil, fail(w, http.StatusUnprocessableEntity, "%s %q was used for another request within %s; use a new key", KeyHeader, key, keyKeep)
	case e.State == statedb.KeyRunning:
		w.Header().Set("Retry-After", "1")
		return nil, nil, fail(w, http.StatusConflict, "the request with %s %q is still running on node %s; ask again once it answered", KeyHeader, key, e.Node)
	case e.State == statedb.KeyUnknown:
		return nil, nil, fail(w, http.StatusGone, "the request with %s %q was started, and its outcome is unknown: node %s stopped while it ran (its sandboxes ended: %s, or %s when another node found it dead)", KeyHeader, key, e.Node, endedByRestart, endedNodeLost)
	}
	var kept keptAnswer
	if err := json.Unmarshal([]byte(e.Answer), &kept); err != nil {
		return nil, nil, fail(w, http.StatusInternalServerError, "the kept answer of %s %q cannot be read: %v", KeyHeader, key, err)
	}
	if kept.Status < 100 || kept.Status > 599 {
		// No answer was kept (the request started and then answered
		// nothing to keep): as good as unknown.
		return nil, nil, fail(w, http.StatusGone, "the request with %s %q was started, and its outcome was not kept", KeyHeader, key)
	}
	w.Header().Set("Idempotent-Replayed", "true")
	if kept.Stream {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(kept.Status)
		w.Write(append(kept.Body, '\n'))
		return nil, nil, kept.Status
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(kept.Status)
	w.Write(kept.Body)
	return nil, nil, kept.Status
}

// done keeps the answer (status, body) of a request that started, and
// releases the key of one that did nothing, so that it may be sent again.
func (k *keyed) done(status int, stream bool, body any) {
	if k == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !k.started.Load() {
		if err := k.s.opts.DB.ReleaseKey(ctx, k.agent, k.key); err != nil {
			k.s.logf("%v", err)
		}
		return
	}
	b, err := json.Marshal(body)
	if err == nil && len(b) > maxKept {
		b, err = json.Marshal(api.Error{Error: fmt.Sprintf("the answer (%d bytes) was too large to keep; the audit log has the outcome", len(b))})
	}
	if err != nil {
		k.s.logf("idempotency key: %v", err)
		return
	}
	kept, _ := json.Marshal(keptAnswer{Status: status, Stream: stream, Body: b})
	if err := k.s.opts.DB.FinishKey(ctx, k.agent, k.key, string(kept)); err != nil {
		k.s.logf("%v", err)
	}
}

// keptResult is what is kept of a command's result: the outcome, and the
// output's size and SHA-256.
func keptResult(key string, res api.ExecResult) api.ExecResult {
	return api.ExecResult{Stdout: []byte{}, Stderr: []byte{}, Outcome: res.Outcome, Replay: replay(key, res.Stdout, res.Stderr)}
}

// keptOutput is what an idempotency key keeps of a command's answer whose
// output went to out: the outcome, and the output by size and SHA-256.
func keptOutput(key string, out *output, o outcome.Outcome) api.ExecResult {
	so, se := out.sums[0], out.sums[1]
	return api.ExecResult{Stdout: []byte{}, Stderr: []byte{}, Outcome: o, Replay: &api.Replay{Key: key,
		StdoutBytes: so.n, StdoutSHA256: so.sum(), StderrBytes: se.n, StderrSHA256: se.sum(), Note: replayNote}}
}

func replay(key string, stdout, stderr []byte) *api.Replay {
	o, e := sha256.Sum256(stdout), sha256.Sum256(stderr)
	return &api.Replay{Key: key, StdoutBytes: int64(len(stdout)), StdoutSHA256: hex.EncodeToString(o[:]),
		StderrBytes: int64(len(stderr)), StderrSHA256: hex.EncodeToString(e[:]), Note: replayNote}
}

// digestWriter counts and hashes what goes through it.
type digestWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func newDigestWriter(w io.Writer) *digestWriter { return &digestWriter{w: w, h: sha256.New()} }

func (d *digestWriter) Write(p []byte) (int, error) {
	d.h.Write(p)
	d.n += int64(len(p))
	return d.w.Write(p)
}

func (d *digestWriter) sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

// outputNote passes on what the writer it wraps says of a cut output.
func (d *digestWriter) outputNote() string {
	if n, ok := d.w.(interface{ outputNote() string }); ok {
		return n.outputNote()
	}
	return ""
}

// pruneKeys forgets the idempotency keys older than keyKeep.
func (s *Server) pruneKeys() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.opts.DB.PruneKeys(ctx, time.Now().Add(-keyKeep)); err != nil {
		s.logf("%v", err)
	}
}

// digestable is a create (or exec) request as its idempotency key's
// digest covers it: the first command's input by its SHA-256, so that a
// large one is not encoded again.
func digestable(req api.CreateRequest) any {
	if req.Exec == nil {
		return req
	}
	x := *req.Exec
	sum := sha256.Sum256(x.Stdin)
	x.Stdin = nil
	return struct {
		Agent       string            `json:"agent"`
		Exec        api.ExecRequest   `json:"exec"`
		StdinSHA256 string            `json:"stdin_sha256"`
		Env         map[string]string `json:"env,omitempty"`
		Timeout     string            `json:"timeout,omitempty"`
	}{req.Agent, x, hex.EncodeToString(sum[:]), req.Env, req.Timeout}
}
