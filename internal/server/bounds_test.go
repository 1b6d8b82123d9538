package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// records returns the records of type typ in the fixture's log.
func (f *fixture) records(t *testing.T, typ string) []map[string]any {
	t.Helper()
	f.srv.opts.Audit.Flush()
	data, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Type == typ {
			out = append(out, r.Data)
		}
	}
	return out
}

// rawGet sends one request on a new connection from ip and returns the
// answer.
func rawGet(t *testing.T, ip, addr, path, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := from(ip, 1)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestTokenRateLimit(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.RateLimit.Token = Rate{Rate: 1, Burst: 2}
		for _, tk := range o.Config.Tokens {
			if tk.Name == "alice-a" {
				tk.RateLimit = &Rate{Rate: 1, Burst: 4}
			}
		}
	})
	ctx := context.Background()
	calls := func(name string, n int) (ok int, err error) {
		for range n {
			if _, err = f.client(name).List(ctx); err != nil {
				return ok, err
			}
			ok++
		}
		return ok, nil
	}
	ok, err := calls("bob-b", 3)
	if ok != 2 || !client.IsStatus(err, 429) {
		t.Fatalf("bob, burst 2: %d answered, then %v; want 2, then 429", ok, err)
	}
	if ok, err := calls("alice-a", 5); ok != 4 || !client.IsStatus(err, 429) {
		t.Fatalf("alice, her own burst of 4: %d answered, then %v", ok, err)
	}
	req, _ := http.NewRequest("GET", f.url+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+f.tokens["bob-b"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a refused request: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	f.advance(time.Second)
	if ok, err := calls("bob-b", 1); ok != 1 {
		t.Fatalf("bob, a second later: %v", err)
	}
	if m := f.metrics(t); !strings.Contains(m, `cordon_rate_limited_total{limit="token",token="bob-b"} 2`) {
		t.Errorf("the refusals are not counted:\n%s", m)
	}
	// Refused requests with a valid token are on the record, every one.
	refused := 0
	for _, r := range f.records(t, "api_request") {
		if r["token"] == "bob-b" && r["status"] == float64(429) {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d of bob's 2 refused requests are recorded", refused)
	}
}

func TestRemoteRateLimit(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.RateLimit.Remote = Rate{Rate: 1, Burst: 3}
	})
	addr := realServer(t, f)
	for i := range 3 {
		if resp := rawGet(t, "127.0.0.2", addr, "/v1/sandboxes", "wrong"); resp.StatusCode != 401 {
			t.Fatalf("request %d without a valid token: %d, want 401", i, resp.StatusCode)
		}
	}
	resp := rawGet(t, "127.0.0.2", addr, "/v1/health", "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the remote's burst: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := rawGet(t, "127.0.0.3", addr, "/v1/health", ""); resp.StatusCode != 200 {
		t.Fatalf("another remote: %d", resp.StatusCode)
	}
	if resp := rawGet(t, "127.0.0.2", addr, "/v1/sandboxes", f.tokens["alice-a"]); resp.StatusCode != 200 {
		t.Fatalf("a valid token from the limited remote: %d", resp.StatusCode)
	}
	if m := f.metrics(t); !strings.Contains(m, `cordon_rate_limited_total{limit="remote",token=""} 1`) {
		t.Errorf("the refusal is not counted:\n%s", m)
	}
}

// Requests without a valid token are recorded with capped fields, within
// a rate; the rest are counted and summed up in the log.
func TestAnonymousRecords(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.RateLimit.Record = Rate{Rate: 1, Burst: 2}
		o.Config.RateLimit.RecordTotal = Rate{Rate: 1, Burst: 3}
		o.Config.HTTP.MaxURLBytes = "4KiB"
	})
	addr := realServer(t, f)
	long := "/v1/sandboxes/" + strings.Repeat("p", 3000)
	for range 5 {
		rawGet(t, "127.0.0.2", addr, long, "")
	}
	for range 5 {
		rawGet(t, "127.0.0.3", addr, "/v1/sandboxes", "wrong")
	}
	if resp := rawGet(t, "127.0.0.4", addr, "/v1/"+strings.Repeat("u", 5000), f.tokens["alice-a"]); resp.StatusCode != 414 {
		t.Fatalf("a URL past max_url_bytes: %d, want 414", resp.StatusCode)
	}
	for range 5 {
		rawGet(t, "127.0.0.4", addr, "/v1/sandboxes", f.tokens["alice-a"])
	}
	anonymous, alice := 0, 0
	for _, r := range f.records(t, "api_request") {
		switch r["token"] {
		case "":
			anonymous++
			if r["remote"] == nil || strings.HasPrefix(r["remote"].(string), "127.0.0.2:") {
				if p := r["path"].(string); len(p) != maxRecordedPath || r["path_bytes"] != float64(len(long)) || len(r["path_sha256"].(string)) != 64 {
					t.Errorf("a long path recorded as %d bytes, %v, %v", len(p), r["path_bytes"], r["path_sha256"])
				}
			}
		case "alice-a":
			alice++
		}
	}
	if anonymous != 3 {
		t.Errorf("%d requests without a valid token recorded; want 3 (2 of one remote, 1 of the other, 3 in all)", anonymous)
	}
	if alice != 6 {
		t.Errorf("%d of alice's 6 requests recorded", alice)
	}
	if m := f.metrics(t); !strings.Contains(m, `cordon_requests_unrecorded_total{reason="rate_limited"} 7`) {
		t.Errorf("the requests left out are not counted:\n%s", m)
	}
	f.srv.summarize()
	sums := f.records(t, "api_requests_unrecorded")
	if len(sums) != 1 || sums[0]["requests"] != float64(7) {
		t.Fatalf("the summary: %v", sums)
	}
	remotes := fmt.Sprint(sums[0]["remotes"])
	if !strings.Contains(remotes, "remote:127.0.0.2 requests:3") || !strings.Contains(remotes, "remote:127.0.0.3 requests:4") {
		t.Errorf("the summary's remotes: %s", remotes)
	}
	f.srv.summarize()
	if n := len(f.records(t, "api_requests_unrecorded")); n != 1 {
		t.Errorf("a summary of nothing was written: %d summaries", n)
	}
}

// A remote gets at most max_connections_per_remote; a full server closes
// the connection that waited longest without a request under way; one
// whose every connection is serving refuses with 503.
func TestConnectionLimits(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.HTTP.MaxConnections, o.Config.HTTP.MaxConnectionsPerRemote = 3, 2
	})
	addr := realServer(t, f)
	// Opened one after another, each sending nothing.
	open := func(ip string) net.Conn {
		c, err := dialFrom(ip, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	answer := func(c net.Conn) string {
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound, not a measure
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(line)
	}
	first := open("127.0.0.2")
	waitFor(t, "the first connection to be counted", func() bool { return f.srv.conns.count() == 1 })
	open("127.0.0.2")
	if got := answer(open("127.0.0.2")); got != "HTTP/1.1 429 Too Many Requests" {
		t.Fatalf("a third connection of one remote: %q", got)
	}
	open("127.0.0.3")
	waitFor(t, "three connections", func() bool { return f.srv.conns.count() == 3 })
	// Full: the oldest silent connection makes room for a new one.
	c := open("127.0.0.4")
	c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"))
	if got := answer(c); got != "HTTP/1.1 200 OK" {
		t.Fatalf("a connection to a full server: %q", got)
	}
	if got := answer(first); got != "EOF" {
		t.Fatalf("the oldest silent connection: %q, want it closed", got)
	}
	if m := f.metrics(t); !strings.Contains(m, `cordon_connections_refused_total{reason="max_connections_per_remote"} 1`) {
		t.Errorf("the refusal is not counted:\n%s", m)
	}

	// Every connection serving a request: the new one is refused.
	l := newConnLimiter(2, 2, nil)
	for range 2 {
		lc, _, _ := l.admit(nil, "a")
		lc.state.Store(int32(http.StateActive))
	}
	if lc, refusal, evict := l.admit(nil, "b"); lc != nil || evict != nil || refusal != refusedFull {
		t.Fatalf("a full server of busy connections: %v %q %v", lc, refusal, evict)
	}
}

// A body that stops coming is cut after body_timeout; a body read to its
// end leaves no deadline on the answer; an answer that is not read is cut
// after write_timeout, one whose writes pause is not.
func TestRequestDeadlines(t *testing.T) {
	const d = 300 * time.Millisecond
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.HTTP.BodyTimeout, o.Config.HTTP.WriteTimeout = d.String(), d.String()
	})
	writeErr := make(chan error, 1)
	f.srv.handle("GET /test/flood", public, func(w http.ResponseWriter, r *http.Request, c caller) int {
		chunk := make([]byte, 1<<20)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return 200
			}
		}
		writeErr <- nil
		return 200
	})
	f.srv.handle("POST /test/pause", public, func(w http.ResponseWriter, r *http.Request, c caller) int {
		io.Copy(io.Discard, r.Body)
		r.Body.Read(make([]byte, 1)) // past the end again
		w.Write([]byte("before\n"))
		http.NewResponseController(w).Flush()
		time.Sleep(3 * d) // longer than either deadline
		if err := r.Context().Err(); err != nil {
			w.Write([]byte("cancelled\n"))
			return 200
		}
		w.Write([]byte("after\n"))
		w.Write(make([]byte, 1<<20)) // more than the server buffers
		return 200
	})
	addr := realServer(t, f)

	// A body that stops.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	token := f.tokens["alice-a"]
	fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"args\":", token)
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a bound, not a measure
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a stalled body was not cut: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a stalled body: %d", resp.StatusCode)
	}

	// A body read to its end, then a pause in the answer.
	resp, err = http.Post("http://"+addr+"/test/pause", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(got), "before\nafter\n") || len(got) != 13+1<<20 {
		t.Errorf("an answer that paused: %d bytes: %.20q", len(got), got)
	}

	// An answer nobody reads.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write([]byte("GET /test/flood HTTP/1.1\r\nHost: x\r\n\r\n"))
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("1 GiB was written to a client that reads nothing")
		}
	case <-time.After(20 * time.Second): // a bound, not a measure
		t.Fatal("the writes to a client that reads nothing were not cut")
	}
}

// The retention removes the oldest rotated files past max_bytes, records
// it, and the index drops what they held; the log still verifies, from
// the first file kept.
func TestAuditRetention(t *testing.T) {
	var log *audit.Log
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.AuditRetention.MaxBytes = "1MiB"
		l, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"), audit.Options{MaxSize: 128 << 10})
		if err != nil {
			t.Fatal(err)
		}
		o.Audit, log = l, l
	})
	pad := strings.Repeat("z", 1000)
	for i := range 3000 {
		f.srv.event(audit.Event{Kind: audit.Decision, Type: "filler", Time: time.Now().UTC(), Data: map[string]any{"i": i, "pad": pad}})
		if i%100 == 99 {
			if err := log.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.srv.index(); err != nil {
		t.Fatal(err)
	}
	before := len(audit.Rotated(log.Path()))
	if err := f.srv.retain(); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, file := range audit.Files(log.Path()) {
		fi, _ := os.Stat(file)
		total += fi.Size()
	}
	after := audit.Rotated(log.Path())
	if len(after) >= before || total > 1<<20+128<<10 {
		t.Fatalf("%d rotated files before, %d after, %d bytes in all", before, len(after), total)
	}
	s, err := audit.Verify(audit.Files(log.Path()), nil, nil)
	if err != nil || s.From <= 1 || s.RetainedBy == 0 {
		t.Fatalf("the log after the retention: %+v %v", s, err)
	}
	// The index holds nothing of the removed files.
	recs, err := f.srv.opts.DB.Search(context.Background(), statedbQuery("filler"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Seq < s.From-1 {
			t.Fatalf("the index still holds record %d, of a removed file (the log starts at %d)", r.Seq, s.From)
		}
	}
	if m := f.metrics(t); !strings.Contains(m, `cordon_audit_files_removed_total{reason="max_bytes"}`) {
		t.Errorf("the removals are not counted:\n%s", m)
	}
}

func statedbQuery(typ string) statedb.Query { return statedb.Query{Type: typ, Limit: 1 << 20} }

// The limits' defaults, a token's own rate, and errors placed in the file.
func TestConfigLimits(t *testing.T) {
	dir := t.TempDir()
	_, sum := NewToken()
	path := filepath.Join(dir, "serve.yaml")
	base := "agents:\n  a:\n    profile: default\ntokens:\n  - name: t\n    agent: a\n    sha256: " + sum + "\n"
	os.WriteFile(path, []byte(base+"    rate_limit: {rate: 5}\naudit_retention:\n  archive: old\n  max_age: 30d\n"), 0o644)
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	h := c.HTTP
	if h.readHeader != DefaultReadHeaderTimeout || h.body != DefaultBodyTimeout || h.write != DefaultWriteTimeout || h.idle != DefaultHTTPIdleTimeout ||
		h.headerBytes != DefaultMaxHeaderBytes || h.urlBytes != DefaultMaxURLBytes || h.MaxConnections != DefaultMaxConnections || h.MaxConnectionsPerRemote != DefaultMaxConnectionsPerRemote {
		t.Errorf("http defaults: %+v", h)
	}
	if c.RateLimit.Token != DefaultTokenRate || c.RateLimit.Remote != DefaultRemoteRate || *c.Tokens[0].RateLimit != (Rate{Rate: 5, Burst: 10}) {
		t.Errorf("rates: %+v, the token's %+v", c.RateLimit, c.Tokens[0].RateLimit)
	}
	if r := c.AuditRetention; r.bytes != DefaultRetentionBytes || r.age != 30*24*time.Hour || r.Archive != filepath.Join(dir, "old") {
		t.Errorf("retention: %+v", r)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"http:\n  read_header_timeout: never\n", "http.read_header_timeout: want a duration"},
		{"http:\n  max_header_bytes: 10\n", "http.max_header_bytes: want a size from 4KiB to 16MiB"},
		{"http:\n  max_connections: 10\n  max_connections_per_remote: 20\n", "http.max_connections_per_remote: want 1 to max_connections (10)"},
		{"rate_limit:\n  token: {rate: -1}\n", "rate_limit.token: want rate"},
		{"audit_retention:\n  max_bytes: 10\n", "audit_retention.max_bytes: want a size of at least 1MiB"},
		{"audit_retention:\n  max_age: 5m\n", "audit_retention.max_age: want an age of at least 1h"},
	} {
		os.WriteFile(path, []byte(base+tt.yaml), 0o644)
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.yaml, err, tt.want)
		}
	}
	os.WriteFile(path, []byte(base+"audit_retention: {max_bytes: \"off\", max_age: \"off\"}\n"), 0o644)
	if c, err := LoadConfig(path); err != nil || c.AuditRetention.bytes != 0 || c.AuditRetention.age != 0 {
		t.Errorf("retention off: %+v %v", c, err)
	}
}
