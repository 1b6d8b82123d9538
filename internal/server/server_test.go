package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// fakeBox stands for a sandbox: each command prints its arguments and
// ends as result says.
type fakeBox struct {
	id     string
	result func(args []string) outcome.Outcome
	mu     sync.Mutex
	closed bool
	done   chan struct{}
	inputs []string // the stdin of each command that had one
	envs   [][]string
}

func (b *fakeBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return outcome.Outcome{}, sandbox.ErrEnded
	}
	b.mu.Lock()
	b.envs = append(b.envs, e.Env)
	b.mu.Unlock()
	if e.Stdin != nil {
		in, _ := io.ReadAll(e.Stdin)
		b.mu.Lock()
		b.inputs = append(b.inputs, string(in))
		b.mu.Unlock()
	}
	if e.Stdout != nil {
		fmt.Fprintf(e.Stdout, "%s ran %s\n", b.id, strings.Join(e.Args, " "))
	}
	if b.result != nil {
		return b.result(e.Args), nil
	}
	code := 0
	return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code, Message: "ok"}, nil
}

func (b *fakeBox) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
}

func (b *fakeBox) Done() <-chan struct{} { return b.done }
func (b *fakeBox) Why() string           { return "" }

// fixture is a server with agents a and b, a token for each and an
// admin's, over fake sandboxes.
type fixture struct {
	srv    *Server
	url    string
	log    string
	tokens map[string]string // token name -> token
	builds atomic.Int64
	mu     sync.Mutex
	boxes  map[string]*fakeBox
	now    atomic.Pointer[time.Time]
}

func newFixture(t *testing.T, pool int, p *profile.Profile, result func([]string) outcome.Outcome, file ...string) *fixture {
	t.Helper()
	return newFixtureWith(t, pool, p, result, file, nil)
}

// newFixtureWith is newFixture with a change to the server's options
// before it starts.
func newFixtureWith(t *testing.T, pool int, p *profile.Profile, result func([]string) outcome.Outcome, file []string, tweak func(*Options)) *fixture {
	t.Helper()
	if p == nil {
		p = profile.Default()
	}
	f := &fixture{tokens: map[string]string{}, boxes: map[string]*fakeBox{}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.now.Store(&start)
	// Tests poll, on a clock that stands still: the rate limits are
	// tested by tests of their own.
	lots := Rate{Rate: 1000, Burst: 100000}
	cfg := &Config{Agents: map[string]*Agent{}, RateLimit: RateLimits{Token: lots, Remote: lots, Record: lots, RecordTotal: lots}}
	for _, name := range []string{"a", "b"} {
		cfg.Agents[name] = &Agent{Name: name, Profile: "default", Loaded: p, Pool: pool,
			Idle: time.Minute, Lifetime: time.Hour, MaxSandboxes: 4}
	}
	if len(file) > 0 {
		a := &Agent{Name: "a", Profile: file[0], Pool: pool, Idle: time.Minute, Lifetime: time.Hour, MaxSandboxes: 4}
		if err := a.load("/"); err != nil {
			t.Fatal(err)
		}
		cfg.Agents["a"] = a
	}
	for _, tk := range []struct {
		name, agent string
		admin       bool
	}{{"alice-a", "a", false}, {"bob-b", "b", false}, {"ops", "", true}} {
		token, sum := NewToken()
		f.tokens[tk.name] = token
		cfg.Tokens = append(cfg.Tokens, &Token{Name: tk.name, Agent: tk.agent, Admin: tk.admin, SHA256: sum})
	}
	f.log = filepath.Join(t.TempDir(), "audit.jsonl")
	al, err := audit.Open(f.log, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(context.Background(), filepath.Join(t.TempDir(), "db", "cordon.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	opts := Options{Config: cfg, Audit: al, DB: db, Now: func() time.Time { return *f.now.Load() },
		Start: func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			f.builds.Add(1)
			b := &fakeBox{id: id, result: result, done: make(chan struct{})}
			f.mu.Lock()
			f.boxes[id] = b
			f.mu.Unlock()
			return b, nil
		}}
	if tweak != nil {
		tweak(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(conform(t, srv.Handler()))
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	f.srv, f.url = srv, ts.URL
	return f
}

// client is a client of the fixture's server with name's token; it takes
// a 429 as the answer, as the tests look at refusals.
func (f *fixture) client(name string) *client.Client {
	c := client.New(f.url, f.tokens[name])
	c.Retry = client.RetryPolicy{}
	return c
}

// metrics scrapes /metrics with the admin's token.
func (f *fixture) metrics(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+f.tokens["ops"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func (f *fixture) advance(d time.Duration) {
	t := f.now.Load().Add(d)
	f.now.Store(&t)
}

func TestAccessControl(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	ctx := context.Background()
	a, b, admin := f.client("alice-a"), f.client("bob-b"), f.client("ops")
	sa, err := a.Create(ctx, "")
	if err != nil || sa.Agent != "a" {
		t.Fatalf("a creates its own: %+v %v", sa, err)
	}
	sb, err := b.Create(ctx, "b")
	if err != nil || sb.Agent != "b" {
		t.Fatalf("b creates its own: %+v %v", sb, err)
	}
	exec := func(c *client.Client, id string) error {
		_, err := c.Run(ctx, id, api.ExecRequest{Args: []string{"true"}})
		return err
	}
	tests := []struct {
		name   string
		do     func() error
		status int
	}{
		{"a creates b's", func() error { _, err := a.Create(ctx, "b"); return err }, 403},
		{"a reads b's", func() error { _, err := a.Get(ctx, sb.ID); return err }, 404},
		{"a runs in b's", func() error { return exec(a, sb.ID) }, 404},
		{"a downloads from b's", func() error { return a.Download(ctx, sb.ID, "/etc/hostname", io.Discard) }, 404},
		{"a uploads to b's", func() error { return a.Upload(ctx, sb.ID, "/tmp/x", strings.NewReader("x"), 0) }, 404},
		{"a keeps b's alive", func() error { _, err := a.KeepAlive(ctx, sb.ID); return err }, 404},
		{"a kills b's", func() error { _, err := a.Kill(ctx, sb.ID); return err }, 404},
		{"a lists approvals", func() error { _, err := a.Approvals(ctx, false); return err }, 403},
		{"a approves", func() error { _, err := a.Decide(ctx, "x", true, api.Decision{}); return err }, 403},
		{"a reads the audit log", func() error { _, err := a.Audit(ctx, nil); return err }, 403},
		{"admin creates", func() error { _, err := admin.Create(ctx, "a"); return err }, 403},
		{"admin runs", func() error { return exec(admin, sa.ID) }, 403},
		{"no token", func() error { _, err := client.New(f.url, "").List(ctx); return err }, 401},
		{"a forged token", func() error { _, err := client.New(f.url, "cordon_"+strings.Repeat("0", 64)).List(ctx); return err }, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !client.IsStatus(err, tt.status) {
				t.Fatalf("got %v, want status %d", err, tt.status)
			}
		})
	}
	if got, err := b.Get(ctx, sb.ID); err != nil || got.State != "running" {
		t.Fatalf("b's sandbox after a's attempts: %+v %v", got, err)
	}
	list, err := a.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != sa.ID {
		t.Fatalf("a's list: %+v %v", list, err)
	}
	all, err := admin.List(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("admin's list: %+v %v", all, err)
	}
	if _, err := admin.Kill(ctx, sb.ID); err != nil {
		t.Fatalf("admin kills b's: %v", err)
	}
	// Every request is on the record with its token's name.
	recs, err := admin.Audit(ctx, url.Values{"type": {"api_request"}, "limit": {"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		var rec struct {
			Data struct {
				Token  string
				Method string
				Path   string
				Status int
			}
		}
		json.Unmarshal(r, &rec)
		seen[fmt.Sprintf("%s %s %s %d", rec.Data.Token, rec.Data.Method, rec.Data.Path, rec.Data.Status)] = true
	}
	for _, want := range []string{
		"alice-a POST /v1/sandboxes 201",
		"alice-a POST /v1/sandboxes 403",
		"alice-a GET /v1/sandboxes/" + sb.ID + " 404",
		"ops POST /v1/sandboxes 403",
		" GET /v1/sandboxes 401",
		"ops DELETE /v1/sandboxes/" + sb.ID + " 200",
	} {
		if !seen[want] {
			t.Errorf("audit log lacks %q", want)
		}
	}
	// The answers are the log's records: each is a line of the file, by
	// its seq and hash.
	data, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var rec struct {
			Seq  int64
			Hash string
		}
		json.Unmarshal(r, &rec)
		if rec.Seq == 0 || !strings.Contains(string(data), fmt.Sprintf(`{"seq":%d,`, rec.Seq)) || !strings.Contains(string(data), `"hash":"`+rec.Hash+`"}`) || len(rec.Hash) != 64 {
			t.Fatalf("an answer that is not a record of the log: %s", r)
		}
	}
}

func TestPoolClaimsEachSandboxOnce(t *testing.T) {
	f := newFixture(t, 2, nil, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	waitFor(t, "the pools to fill", func() bool { h, _ := a.Health(ctx); return h.Warm == 4 })
	ids := map[string]bool{}
	for i := 0; i < 3; i++ {
		sb, err := a.Create(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if ids[sb.ID] {
			t.Fatalf("sandbox %s given twice", sb.ID)
		}
		ids[sb.ID] = true
		if i < 2 && !sb.Warm {
			t.Errorf("claim %d was not pre-warmed", i)
		}
		res, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"echo"}})
		if err != nil || !strings.HasPrefix(string(res.Stdout), sb.ID+" ran echo") {
			t.Fatalf("ran in %s: %q %v", sb.ID, res.Stdout, err)
		}
		if _, err := a.Kill(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		closed := f.boxes[sb.ID].closed
		f.mu.Unlock()
		if !closed {
			t.Errorf("killed sandbox %s still runs", sb.ID)
		}
		if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); !client.IsStatus(err, 410) {
			t.Errorf("a command in a killed sandbox: %v, want 410", err)
		}
	}
	waitFor(t, "the pool to refill", func() bool { h, _ := a.Health(ctx); return h.Warm == 4 })
	for id := range ids {
		f.mu.Lock()
		for other, b := range f.boxes {
			if other != id && b.id == id {
				t.Errorf("sandbox %s reused", id)
			}
		}
		f.mu.Unlock()
	}
}

func TestMaxSandboxes(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	for i := 0; i < 4; i++ {
		if _, err := a.Create(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Create(ctx, ""); !client.IsStatus(err, 429) {
		t.Fatalf("a fifth sandbox: %v, want 429", err)
	}
	// Side by side, claims do not pass the limit together.
	b := f.client("bob-b")
	var wg sync.WaitGroup
	var got atomic.Int64
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Create(ctx, ""); err == nil {
				got.Add(1)
			}
		}()
	}
	wg.Wait()
	if got.Load() != 4 {
		t.Fatalf("%d of 12 concurrent claims succeeded, want max_sandboxes (4)", got.Load())
	}

}

func TestTimeouts(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	idle, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f.advance(40 * time.Second)
		if _, err := a.KeepAlive(ctx, kept.ID); err != nil {
			t.Fatalf("keepalive %d: %v", i, err)
		}
	}
	waitFor(t, "the idle sandbox to end", func() bool { sb, _ := a.Get(ctx, idle.ID); return sb.Ended == "idle_timeout" })
	if sb, _ := a.Get(ctx, kept.ID); sb.State != "running" {
		t.Fatalf("the kept sandbox: %+v", sb)
	}
	f.advance(time.Hour)
	waitFor(t, "the old sandbox to end", func() bool { sb, _ := a.Get(ctx, kept.ID); return sb.Ended == "max_lifetime" })
}

// A create's env reaches every command of the sandbox, under the
// command's own; its timeout ends the sandbox, within the agent's
// max_lifetime, and a keep-alive does not move it.
func TestCreateEnvAndTimeout(t *testing.T) {
	f := newFixtureWith(t, 1, nil, nil, nil, func(o *Options) { o.Config.Agents["a"].Idle = 2 * time.Hour })
	ctx := context.Background()
	a := f.client("alice-a")
	for _, bad := range []api.CreateRequest{{Timeout: "2h"}, {Timeout: "10ms"}, {Timeout: "soon"}, {Env: map[string]string{"A=B": "x"}}} {
		if _, err := a.CreateWith(ctx, bad); !client.IsStatus(err, http.StatusBadRequest) {
			t.Errorf("create %+v: %v, want 400", bad, err)
		}
	}
	sb, err := a.CreateWith(ctx, api.CreateRequest{Env: map[string]string{"BASE": "1", "BOTH": "sandbox"}, Timeout: "30m",
		Exec: &api.ExecRequest{Args: []string{"first"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := f.now.Load().Add(30 * time.Minute); !sb.Expires.Equal(want) {
		t.Errorf("expires %v, want %v", sb.Expires, want)
	}
	if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"second"}, Env: map[string]string{"BOTH": "command", "OWN": "2"}}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	b := f.boxes[sb.ID]
	f.mu.Unlock()
	b.mu.Lock()
	envs := slices.Clone(b.envs)
	b.mu.Unlock()
	want := [][]string{{"BASE=1", "BOTH=sandbox"}, {"BASE=1", "BOTH=command", "OWN=2"}}
	if fmt.Sprint(envs) != fmt.Sprint(want) {
		t.Errorf("the commands' environments: %v, want %v", envs, want)
	}
	other, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	f.advance(20 * time.Minute)
	if _, err := a.KeepAlive(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.KeepAlive(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	f.advance(11 * time.Minute)
	waitFor(t, "the sandbox to end at its timeout", func() bool { got, _ := a.Get(ctx, sb.ID); return got.Ended == "timeout" })
	if got, _ := a.Get(ctx, other.ID); got.State != "running" {
		t.Errorf("a sandbox without a timeout: %+v", got)
	}
}

func TestTrajectoryStopsTheSession(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte(`version: 1
agent: a
trajectory:
  rules:
    - name: exfil-volume
      when: 'session.bytes_out > 300'
      action: stop
`))
	if err != nil {
		t.Fatal(err)
	}
	upload := func([]string) outcome.Outcome {
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code,
			Egress: []egress.Event{{Host: "api.example.com", Decision: "allow", BytesOut: 100}}}
	}
	f := newFixture(t, 0, p, upload)
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"upload"}}); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	// The fourth is allowed on its own; the checkpoint after it stops the
	// session.
	if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"upload"}}); err != nil {
		t.Fatalf("upload 4: %v", err)
	}
	_, err = a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"upload"}})
	if err == nil || !(client.IsStatus(err, 409) || client.IsStatus(err, 410)) {
		t.Fatalf("upload 5: %v, want refused", err)
	}
	waitFor(t, "the sandbox to end", func() bool { got, _ := a.Get(ctx, sb.ID); return got.Ended == "trajectory" })
	got, _ := a.Get(ctx, sb.ID)
	if got.Session == nil || got.Session.BytesOut != 400 || !strings.Contains(got.Session.Checkpoint, "trajectory.rules.exfil-volume (stop)") {
		t.Fatalf("session: %+v", got.Session)
	}
	data, _ := os.ReadFile(f.log)
	if !strings.Contains(string(data), `"type":"trajectory_checkpoint"`) || !strings.Contains(string(data), `"reason":"trajectory"`) {
		t.Fatalf("the audit log lacks the checkpoint or the end:\n%s", data)
	}
}

func TestMetrics(t *testing.T) {
	f := newFixture(t, 1, nil, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	waitFor(t, "the pools to fill", func() bool { h, _ := a.Health(ctx); return h.Warm == 2 })
	sb, _ := a.Create(ctx, "")
	a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}})
	a.Create(ctx, "b")
	body := f.metrics(t)
	for _, want := range []string{
		`cordon_sandboxes{agent="a",state="running"} 1`,
		`cordon_commands_total{agent="a",status="ok"} 1`,
		`cordon_sandbox_claims_total{agent="a",warm="true"} 1`,
		`cordon_denials_total{agent="a",rule="access.agent"} 1`,
		"# TYPE cordon_sandbox_starts_total counter",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	_, sum := NewToken()
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "agents:\n  a:\n    profile: default\n    pools: 2\n", `unknown field "pools"`},
		{"no sha", "agents:\n  a:\n    profile: default\ntokens:\n  - name: t\n    agent: a\n    sha256: abc\n", "serve.yaml:7:13: tokens[0].sha256: want the token's SHA-256"},
		{"unknown agent", "agents:\n  a:\n    profile: default\ntokens:\n  - name: t\n    agent: z\n    sha256: " + sum + "\n", `serve.yaml:6:12: tokens[0].agent: no agent "z" in agents`},
		{"bad timeout", "agents:\n  a:\n    profile: default\n    idle_timeout: soon\n", "serve.yaml:4:19: agents.a.idle_timeout: want a duration"},
		{"missing profile", "agents:\n  a:\n    profile: nope.yaml\n", "serve.yaml:3:14: agents.a.profile: reading profile"},
		{"pool too big", "agents:\n  a:\n    profile: default\n    pool: 9\n    max_sandboxes: 2\n", "serve.yaml:4:11: agents.a.pool: want 0 to max_sandboxes (2)"},
		{"no tokens", "agents:\n  a:\n    profile: default\n", "tokens: name at least one token"},
		{"database", "database: mysql://db/x\nagents:\n  a:\n    profile: default\n", `serve.yaml:1:11: database: want a postgres:// URL or an SQLite file's path, found "mysql://db/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "serve.yaml")
			os.WriteFile(path, []byte(tt.yaml), 0o644)
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// A database's relative path is the configuration file's.
func TestConfigDatabasePath(t *testing.T) {
	dir := t.TempDir()
	_, sum := NewToken()
	path := filepath.Join(dir, "serve.yaml")
	for db, want := range map[string]string{
		"state/cordon.db":       filepath.Join(dir, "state/cordon.db"),
		"sqlite:cordon.db":      filepath.Join(dir, "cordon.db"),
		"/var/lib/cordon.db":    "/var/lib/cordon.db",
		"postgres://h/cordon":   "postgres://h/cordon",
		"sqlite:/srv/cordon.db": "sqlite:/srv/cordon.db",
	} {
		os.WriteFile(path, []byte("database: "+db+"\nagents:\n  a:\n    profile: default\ntokens:\n  - name: t\n    agent: a\n    sha256: "+sum+"\n"), 0o644)
		c, err := LoadConfig(path)
		if err != nil || c.Database != want {
			t.Errorf("database %s: got %q %v, want %q", db, c.Database, err, want)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestOpenAPICoversTheRoutes checks that docs and server agree: every
// route the server answers is in the OpenAPI document, and every path and
// method there is a route.
func TestOpenAPICoversTheRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" && method != "description" && method != "summary" {
				documented[strings.ToUpper(method)+" "+p] = true
			}
		}
	}
	f := newFixture(t, 0, nil, nil)
	served := map[string]bool{}
	for _, r := range f.srv.routeList {
		r = strings.ReplaceAll(r, "...}", "}") // a wildcard is one parameter in OpenAPI
		switch {
		case r == "/" || r == "GET /{$}" || r == "GET /favicon.ico" || strings.HasPrefix(r, "GET /ui/"):
		case !strings.Contains(r, " "): // every method of a path
			for _, m := range []string{"GET", "POST", "DELETE"} {
				served[m+" "+r] = true
			}
		default:
			served[r] = true
		}
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.yaml", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("openapi.yaml documents %s, which the server does not answer", r)
		}
	}
}

func TestProfileReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a.yaml")
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("version: 1\nagent: a\nhostname: first\n")
	f := newFixture(t, 1, nil, nil, file)
	ctx := context.Background()
	a := f.client("alice-a")
	// create claims a sandbox and gives it back, keeping nothing.
	create := func() (api.Sandbox, error) {
		sb, err := a.Create(ctx, "")
		if err == nil {
			a.Kill(ctx, sb.ID)
		}
		return sb, err
	}
	waitFor(t, "the pool to fill", func() bool { h, _ := a.Health(ctx); return h.Warm == 2 })
	first, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to refill", func() bool { h, _ := a.Health(ctx); return h.Warm == 2 })
	f.mu.Lock()
	var old []*fakeBox // a's pooled sandbox, of the first profile
	for id, b := range f.boxes {
		if id != first.ID && !b.closed {
			old = append(old, b)
		}
	}
	f.mu.Unlock()
	write("version: 1\nagent: a\nhostname: second\n")
	// a's pooled sandbox, of the old profile, is ended; b's stays.
	waitFor(t, "the pooled sandbox of the old profile to end", func() bool {
		closed := 0
		for _, b := range old {
			b.mu.Lock()
			if b.closed {
				closed++
			}
			b.mu.Unlock()
		}
		return closed == 1
	})
	sb, err := create()
	if err != nil || sb.ProfileSHA256 == first.ProfileSHA256 {
		t.Fatalf("a sandbox after the change: %+v %v", sb, err)
	}
	if got, _ := a.Get(ctx, first.ID); got.State != "running" {
		t.Errorf("a claimed sandbox of the old profile was ended: %+v", got)
	}
	write("version: 1\nagent: somebody-else\n")
	waitFor(t, "the broken profile to refuse sandboxes", func() bool {
		_, err := create()
		return client.IsStatus(err, 503)
	})
	_, err = create()
	if err == nil || !strings.Contains(err.Error(), `is the profile of agent "somebody-else", not "a"`) {
		t.Fatalf("create with a broken profile: %v", err)
	}
	write("version: 1\nagent: a\nhostname: third\n")
	waitFor(t, "the fixed profile to give sandboxes again", func() bool { _, err := create(); return err == nil })
	data, _ := os.ReadFile(f.log)
	for _, want := range []string{`"type":"profile_reloaded"`, `"type":"profile_refused"`, `"reason":"profile_changed"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
}

// driftingBox is a fakeBox whose drift checks find what drifted says.
type driftingBox struct {
	*fakeBox
	drifted atomic.Pointer[string]
	checks  atomic.Int64
}

func (b *driftingBox) CheckDrift() []string {
	b.checks.Add(1)
	if d := b.drifted.Load(); d != nil {
		return []string{*d}
	}
	return nil
}

// Drift is checked at every checkpoint of a session: those of its steps
// (every_steps) and those of time (every).
func TestDriftCheckedAtCheckpoints(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ndrift:\n  every: 1h\ntrajectory:\n  every_steps: 2\n  every: 30s\n"))
	if err != nil {
		t.Fatal(err)
	}
	var boxes []*driftingBox
	var mu sync.Mutex
	f := newFixtureWith(t, 0, p, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			b := &driftingBox{fakeBox: &fakeBox{id: id, done: make(chan struct{})}}
			mu.Lock()
			boxes = append(boxes, b)
			mu.Unlock()
			return b, nil
		}
	})
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	box := boxes[0]
	run := func() error { _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); return err }
	run()
	if n := box.checks.Load(); n != 0 {
		t.Fatalf("drift checked %d times before a checkpoint", n)
	}
	run()
	if n := box.checks.Load(); n != 1 {
		t.Fatalf("drift checked %d times at the checkpoint of step 2", n)
	}
	f.advance(31 * time.Second)
	waitFor(t, "the checkpoint of time", func() bool { return box.checks.Load() == 2 })
	changed := "the cgroup limit memory.limit_in_bytes changed (268435456, now 67108864)"
	box.drifted.Store(&changed)
	run()
	run()
	waitFor(t, "the sandbox to be stopped for drift", func() bool { got, _ := a.Get(ctx, sb.ID); return got.Ended == "drift" })
	if err := run(); !client.IsStatus(err, 410) {
		t.Fatalf("a command after drift: %v", err)
	}
	data, _ := os.ReadFile(f.log)
	if !strings.Contains(string(data), `"type":"drift"`) || !strings.Contains(string(data), "now 67108864") {
		t.Fatalf("the audit log lacks the drift:\n%s", data)
	}
	body := f.metrics(t)
	if !strings.Contains(body, `cordon_drift_events_total{agent="a"} 1`+"\n") || !strings.Contains(body, `cordon_sandbox_ends_total{agent="a",reason="drift"} 1`+"\n") {
		t.Fatalf("the metrics lack the drift:\n%s", body)
	}
}

// The probes run for every agent at start, again when its profile changes,
// and every probe_every; their results are metrics and audit records.
func TestProbesOnSchedule(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(file, []byte("version: 1\nagent: a\n"), 0o644)
	var mu sync.Mutex
	runs := map[string]int{}
	f := newFixtureWith(t, 0, nil, nil, []string{file}, func(o *Options) {
		o.Config.ProbeSched = time.Hour
		o.Probe = func(ctx context.Context, a *Agent, p *profile.Profile) (ProbeResult, error) {
			mu.Lock()
			runs[a.Name]++
			mu.Unlock()
			res := ProbeResult{Statuses: map[string]int{"contained": 29}}
			if p.Hostname == "weak" {
				res = ProbeResult{Statuses: map[string]int{"contained": 28, "escaped": 1}, Escaped: []string{"agent-env-canary"}}
			}
			return res, nil
		}
	})
	count := func(agent string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[agent]
	}
	waitFor(t, "a run per agent at start", func() bool { return count("a") == 1 && count("b") == 1 })
	os.WriteFile(file, []byte("version: 1\nagent: a\nhostname: weak\n"), 0o644)
	waitFor(t, "a run after the profile changed", func() bool { return count("a") == 2 })
	f.advance(61 * time.Minute)
	waitFor(t, "the runs of probe_every", func() bool { return count("a") == 3 && count("b") == 2 })
	waitFor(t, "the escape in the metrics", func() bool {
		body := f.metrics(t)
		return strings.Contains(body, `cordon_probe_results{agent="a",status="escaped"} 1`+"\n") &&
			strings.Contains(body, `cordon_probe_results{agent="b",status="contained"} 29`+"\n")
	})
	f.srv.opts.Audit.Flush()
	data, _ := os.ReadFile(f.log)
	if !strings.Contains(string(data), `"escaped":["agent-env-canary"]`) {
		t.Fatalf("the audit log lacks the escape:\n%s", data)
	}
}

// A trajectory rule with action approve holds the session: each later
// step waits until a person approves that very step, then runs once.
func TestTrajectoryApproveHoldsTheSession(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntrajectory:\n  rules:\n    - name: many\n      when: 'session.steps >= 2'\n      action: approve\n"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, 0, p, nil, nil, func(o *Options) { o.Approvals = store })
	ctx := context.Background()
	a, admin := f.client("alice-a"), f.client("ops")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (api.ExecResult, error) {
		return a.Run(ctx, sb.ID, api.ExecRequest{Args: args})
	}
	run("one")
	run("two") // the checkpoint after it holds the session
	_, err = run("three")
	if !client.IsStatus(err, 423) || !strings.Contains(err.Error(), "trajectory.rules.many") {
		t.Fatalf("a step of the held session: %v", err)
	}
	pending, err := admin.Approvals(ctx, false)
	if err != nil || len(pending) != 1 || pending[0].Tool != "exec" || !strings.Contains(string(pending[0].Args), `"three"`) {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	if _, err := run("three"); !client.IsStatus(err, 423) {
		t.Fatalf("asked again before a decision: %v", err)
	}
	if _, err := run("four"); !client.IsStatus(err, 423) {
		t.Fatalf("another step: %v", err)
	}
	// The decision is the admin token's: a name typed in the body is
	// refused.
	req, _ := http.NewRequest("POST", f.url+api.Version+"/approvals/"+pending[0].ID+"/approve", strings.NewReader(`{"reason": "fine", "by": "alice"}`))
	req.Header.Set("Authorization", "Bearer "+f.tokens["ops"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a decision with a typed name: %d", resp.StatusCode)
	}
	if _, err := admin.Decide(ctx, pending[0].ID, true, api.Decision{Reason: "fine"}); err != nil {
		t.Fatal(err)
	}
	if it, _ := store.Get(pending[0].ID); it.By != "ops" {
		t.Errorf("decided by %q, want the admin token's name ops", it.By)
	}
	res, err := run("three")
	if err != nil || !strings.Contains(string(res.Stdout), "ran three") {
		t.Fatalf("the approved step: %+v %v", res, err)
	}
	if _, err := run("three"); !client.IsStatus(err, 423) {
		t.Fatalf("the approved step, a second time: %v", err)
	}
	if got, _ := a.Get(ctx, sb.ID); got.State != "running" {
		t.Fatalf("the held sandbox was ended: %+v", got)
	}
}

// No record, no run: a command whose action cannot be written to the
// audit log does not run, and the answer says so.
func TestUnrecordedStepsDoNotRun(t *testing.T) {
	var ran atomic.Int64
	var f *fixture
	breakLog := func() {
		if err := os.Remove(f.log); err != nil {
			t.Error(err)
		}
		if err := os.Mkdir(f.log, 0o700); err != nil {
			t.Error(err)
		}
	}
	f = newFixture(t, 0, nil, func(args []string) outcome.Outcome {
		ran.Add(1)
		if args[0] == "break-the-log" {
			breakLog()
		}
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}
	})
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); err != nil || ran.Load() != 1 {
		t.Fatalf("a recorded command: %v (ran %d)", err, ran.Load())
	}
	// The log's file becomes a directory while a command runs: the
	// command ran, its record cannot be written, and that is no success.
	res, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"break-the-log"}})
	if !client.IsStatus(err, 500) || !strings.Contains(err.Error(), "the command ran (ok), but its record could not be written") || res.Stdout != nil {
		t.Fatalf("a command whose record fails: %+v %v", res, err)
	}
	_, err = a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}})
	if !client.IsStatus(err, 500) || !strings.Contains(err.Error(), "the step was not run") || ran.Load() != 2 {
		t.Fatalf("a command with no audit log: %v (ran %d)", err, ran.Load())
	}
	err = a.Upload(ctx, sb.ID, "/workspace/x", strings.NewReader("x"), 0)
	if !client.IsStatus(err, 500) || !strings.Contains(err.Error(), "the step was not run") {
		t.Fatalf("an upload with no audit log: %v", err)
	}
}

// What the database refused goes back ahead of what came since, so that
// the index keeps the log's order.
func TestPendingPutBack(t *testing.T) {
	p := pending{changed: map[string]*entry{}}
	p.recs = []audit.Record{{Seq: 1}, {Seq: 2}}
	p.changed["sb-1"] = &entry{id: "sb-1"}
	recs, changed, _ := p.take()
	p.recs = append(p.recs, audit.Record{Seq: 3})
	p.changed["sb-2"] = &entry{id: "sb-2"}
	p.putBack(recs, changed)
	recs, changed, _ = p.take()
	if len(recs) != 3 || recs[0].Seq != 1 || recs[1].Seq != 2 || recs[2].Seq != 3 || len(changed) != 2 {
		t.Fatalf("after a refusal: %+v %v", recs, changed)
	}
	if recs, changed, _ = p.take(); len(recs) != 0 || len(changed) != 0 {
		t.Fatalf("taken twice: %+v %v", recs, changed)
	}
}
