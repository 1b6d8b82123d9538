package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// bounds is what the server keeps to bound its clients: rate limits, and
// the count of requests it did not record.
type bounds struct {
	tokens, remotes, records *limiter
	recordMu                 sync.Mutex
	recordTotal              bucket

	mu         sync.Mutex
	unrecorded map[string]int // by remote address
	others     int            // remotes past maxSummaryRemotes
	reasons    map[string]int
	since      time.Time
}

func newBounds() *bounds {
	return &bounds{tokens: newLimiter(), remotes: newLimiter(), records: newLimiter(),
		unrecorded: map[string]int{}, reasons: map[string]int{}}
}

// Caps of what a request's record keeps of its fields.
const (
	maxRecordedPath   = 256
	maxRecordedMethod = 16
	maxRecordedRemote = 64
	// maxSummaryRemotes bounds the remotes an unrecorded summary names.
	maxSummaryRemotes = 1000
	// summaryEvery is how often requests left out of the log are summed up
	// in it.
	summaryEvery = time.Minute
)

// capString cuts s to at most n bytes, on a character boundary.
func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// admit applies the rate limits and the URL's bound to a request before
// its handler: the status it was refused with, or 0.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, c caller) int {
	b, cfg := s.bounds, s.opts.Config
	var ok bool
	var wait time.Duration
	if c.via != "" {
		// Counted by the node that forwarded it.
		ok = true
	} else if c.token != nil {
		rate := cfg.RateLimit.Token
		if c.token.RateLimit != nil {
			rate = *c.token.RateLimit
		}
		if ok, wait = b.tokens.allow(c.token.Name, rate, s.opts.Now()); !ok {
			s.metrics.add(1, "cordon_rate_limited_total", "limit", "token", "token", c.token.Name)
		}
	} else if ok, wait = b.remotes.allow(remoteKey(r.RemoteAddr), cfg.RateLimit.Remote, s.opts.Now()); !ok {
		s.metrics.add(1, "cordon_rate_limited_total", "limit", "remote", "token", "")
	}
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(wait)))
		return fail(w, http.StatusTooManyRequests, "too many requests; try again in %d s", retryAfter(wait))
	}
	if max := cfg.HTTP.urlBytes; max > 0 && len(r.RequestURI) > max {
		return fail(w, http.StatusRequestURITooLong, "the URL is %d bytes; at most %d are taken", len(r.RequestURI), max)
	}
	return 0
}

// recordRequest records a request in the audit log, its fields capped: a
// long path is kept as its first bytes, its length and its SHA-256. A
// request with a valid token is always recorded; one without is recorded
// within the rate_limit.record limits, and otherwise counted.
func (s *Server) recordRequest(r *http.Request, c caller, status int, aborted bool) {
	if c.token == nil && !s.recordAnonymous(r) {
		return
	}
	data := map[string]any{"token": c.name(), "method": capString(r.Method, maxRecordedMethod),
		"path": capString(redactCapability(r.URL.Path), maxRecordedPath), "status": status, "remote": capString(r.RemoteAddr, maxRecordedRemote)}
	if c.via != "" {
		data["via"], data["remote"] = capString(c.via, maxRecordedRemote), capString(c.who, maxRecordedRemote)
	}
	if c.to != "" {
		data["forwarded_to"] = capString(c.to, maxRecordedRemote)
	}
	if aborted {
		data["aborted"] = true // the answer broke off half sent
	}
	if len(r.URL.Path) > maxRecordedPath {
		sum := sha256.Sum256([]byte(r.URL.Path))
		data["path_bytes"] = len(r.URL.Path)
		data["path_sha256"] = hex.EncodeToString(sum[:])
	}
	s.record("", c, audit.Decision, "api_request", data)
}

// recordAnonymous reports whether a request without a valid token may be
// recorded now; when not, it is counted for the next summary.
func (s *Server) recordAnonymous(r *http.Request) bool {
	b, cfg := s.bounds, s.opts.Config
	remote, now := remoteKey(r.RemoteAddr), s.opts.Now()
	ok, _ := b.records.allow(remote, cfg.RateLimit.Record, now)
	if ok {
		b.recordMu.Lock()
		if b.recordTotal.last.IsZero() {
			b.recordTotal = bucket{tokens: float64(cfg.RateLimit.RecordTotal.Burst), last: now}
		}
		ok, _ = b.recordTotal.take(cfg.RateLimit.RecordTotal, now)
		b.recordMu.Unlock()
	}
	if ok {
		return true
	}
	s.metrics.add(1, "cordon_requests_unrecorded_total", "reason", "rate_limited")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		b.since = now
	}
	b.reasons["rate_limited"]++
	if _, seen := b.unrecorded[remote]; seen || len(b.unrecorded) < maxSummaryRemotes {
		b.unrecorded[remote]++
	} else {
		b.others++
	}
	return false
}

// summarize records how many requests were left out of the log since the
// last summary, from which remotes (the most frequent first), so that the
// gap shows in the log itself.
func (s *Server) summarize() {
	b := s.bounds
	b.mu.Lock()
	if len(b.reasons) == 0 {
		b.mu.Unlock()
		return
	}
	remotes, others, reasons, since := b.unrecorded, b.others, b.reasons, b.since
	b.unrecorded, b.others, b.reasons, b.since = map[string]int{}, 0, map[string]int{}, time.Time{}
	b.mu.Unlock()
	type count struct {
		Remote   string `json:"remote"`
		Requests int    `json:"requests"`
	}
	var top []count
	total := others
	for k, n := range remotes {
		top = append(top, count{k, n})
		total += n
	}
	sort.Slice(top, func(i, j int) bool {
		return top[i].Requests > top[j].Requests || top[i].Requests == top[j].Requests && top[i].Remote < top[j].Remote
	})
	const named = 20
	for _, c := range top[min(named, len(top)):] {
		others += c.Requests
	}
	top = top[:min(named, len(top))]
	s.record("", caller{}, audit.Decision, "api_requests_unrecorded", map[string]any{
		"since": since.UTC(), "until": s.opts.Now().UTC(), "requests": total, "reasons": reasons,
		"remotes": top, "remotes_counted": len(remotes), "other_requests": others,
	})
	if err := s.recorded(); err != nil {
		s.logf("the summary of unrecorded requests: %v", err)
	}
}

// summarizer writes the summary of unrecorded requests every
// summaryEvery (Close writes the last one).
func (s *Server) summarizer() {
	defer s.wg.Done()
	t := time.NewTicker(summaryEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.summarize()
			return
		case <-t.C:
			s.summarize()
		}
	}
}

// bound sets the deadlines of a request: its body must keep coming (a
// read waits at most body_timeout), and its answer must be read (a write
// waits at most write_timeout). Neither cuts a long upload or a long
// stream that progresses.
func (s *Server) bound(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	h := s.opts.Config.HTTP
	rc := http.NewResponseController(w)
	if h.body > 0 && r.Body != nil && r.Body != http.NoBody {
		rc.SetReadDeadline(time.Now().Add(h.body))
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, d: h.body}
	}
	if h.write <= 0 {
		return w, r, func() {}
	}
	rc.SetWriteDeadline(time.Now().Add(h.write))
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: h.write}
	// What the server writes after the handler (its buffer) gets its
	// time too.
	return dw, r, func() { rc.SetWriteDeadline(time.Now().Add(h.write)) }
}

// deadlineBody is a request body each read of which waits at most d; once
// it is read to its end, reads have no deadline (the server then watches
// the connection for a close, through a long answer). After another error
// the deadline stays: what the server then reads of the rest of the body
// waits no longer.
type deadlineBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	d   time.Duration
	eof bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.eof {
		// The server reads the connection now (for a close): a deadline
		// would end the request.
		return 0, io.EOF
	}
	b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter is an answer each write and flush of which waits at most
// d for the client to read.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

// Flush sends what is buffered, within the deadline.
func (w *deadlineWriter) Flush() {
	w.FlushError()
}

// FlushError sends what is buffered, within the deadline, and says
// whether it could.
func (w *deadlineWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.rc.Flush()
}

// Hijack hands the connection over without deadlines: whoever takes it
// sets its own.
func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := w.rc.Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("hijacking the connection: %w", err)
	}
	conn.SetDeadline(time.Time{})
	return conn, rw, nil
}

// Unwrap lets http.ResponseController reach the writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
