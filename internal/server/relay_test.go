package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// cluster is nodes of one database, over fake sandboxes, with the same
// agents and tokens.
type cluster struct {
	db     string
	tokens map[string]string
	sums   map[string]string
	secret []byte
	nodes  map[string]*clusterNode
	// box builds the sandboxes of node; nil: a fakeBox.
	box func(node, id string) Sandbox
}

type clusterNode struct {
	srv     *Server
	url     string
	log     string
	db      *statedb.DB
	drained atomic.Int32
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{db: filepath.Join(t.TempDir(), "db", "cordon.db"), tokens: map[string]string{}, sums: map[string]string{},
		secret: []byte(strings.Repeat("s", 32)), nodes: map[string]*clusterNode{}}
	for _, name := range []string{"alice-a", "bob-b", "ops"} {
		c.tokens[name], c.sums[name] = NewToken()
	}
	return c
}

// start starts node name; tweak changes its configuration first.
func (c *cluster) start(t *testing.T, name string, tweak func(*Config)) *clusterNode {
	t.Helper()
	lots := Rate{Rate: 1000, Burst: 100000}
	cfg := &Config{Agents: map[string]*Agent{}, RateLimit: RateLimits{Token: lots, Remote: lots, Record: lots, RecordTotal: lots}, Node: name}
	for _, a := range []string{"a", "b"} {
		cfg.Agents[a] = &Agent{Name: a, Profile: "default", Loaded: profile.Default(), Idle: time.Minute, Lifetime: time.Hour, MaxSandboxes: 2}
	}
	cfg.Tokens = []*Token{{Name: "alice-a", Agent: "a", SHA256: c.sums["alice-a"]}, {Name: "bob-b", Agent: "b", SHA256: c.sums["bob-b"]}, {Name: "ops", Admin: true, SHA256: c.sums["ops"]}}
	ts := httptest.NewUnstartedServer(nil)
	cfg.Cluster = Cluster{Advertise: "http://" + ts.Listener.Addr().String(), beat: 200 * time.Millisecond, timeout: 2 * time.Second, secret: c.secret}
	if tweak != nil {
		tweak(cfg)
	}
	n := &clusterNode{url: ts.URL, log: filepath.Join(t.TempDir(), "audit.jsonl")}
	al, err := audit.Open(n.log, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n.db, err = statedb.Open(context.Background(), c.db); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Log: testLog{t, name}, Config: cfg, Audit: al, DB: n.db, Node: name, OnDrain: func() { n.drained.Add(1) },
		Start: func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			if c.box != nil {
				return c.box(name, id), nil
			}
			return &fakeBox{id: name + ":" + id, done: make(chan struct{})}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = conform(t, srv.Handler())
	ts.Start()
	n.url, n.srv = ts.URL, srv
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		n.db.Close()
	})
	c.nodes[name] = n
	return n
}

func (c *cluster) client(n *clusterNode, token string) *client.Client {
	cl := client.New(n.url, c.tokens[token])
	cl.Retry = client.RetryPolicy{}
	return cl
}

// Any node answers for any sandbox: creates are placed by room, and
// exec, get, list and kill reach the node that holds the sandbox, which
// records which node forwarded them.
func TestClusterForwards(t *testing.T) {
	c := newCluster(t)
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	ctx := context.Background()
	alice := c.client(n1, "alice-a")
	on := map[string]string{}
	for i := 0; i < 4; i++ {
		sb, err := alice.Create(ctx, "")
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		on[sb.ID] = sb.Node
	}
	per := map[string]int{}
	for _, node := range on {
		per[node]++
	}
	if per["n1"] != 2 || per["n2"] != 2 {
		t.Fatalf("4 sandboxes over two nodes of max_sandboxes 2 each: %v", per)
	}
	// Both nodes are full for agent a: the next create is refused.
	if _, err := alice.Create(ctx, ""); !client.IsStatus(err, http.StatusTooManyRequests) {
		t.Fatalf("a create with every node full: %v", err)
	}
	for id, node := range on {
		res, err := alice.Run(ctx, id, api.ExecRequest{Args: []string{"echo", "hi"}})
		if err != nil {
			t.Fatalf("exec on %s through n1: %v", node, err)
		}
		if want := node + ":" + id + " ran echo hi\n"; string(res.Stdout) != want {
			t.Fatalf("exec on %s through n1: %q, want %q", node, res.Stdout, want)
		}
		// Streamed, too.
		var out bytes.Buffer
		if o, err := alice.Exec(ctx, id, api.ExecRequest{Args: []string{"streamed"}}, &out, io.Discard); err != nil || o.Status != "ok" || out.String() != node+":"+id+" ran streamed\n" {
			t.Fatalf("a streamed exec on %s through n1: %q %+v %v", node, out.String(), o, err)
		}
		got, err := c.client(n2, "alice-a").Get(ctx, id)
		if err != nil || got.Node != node || got.State != "running" {
			t.Fatalf("get through n2: %+v %v", got, err)
		}
	}
	// Another agent's sandbox on another node is not found, not forwarded.
	for id := range on {
		if _, err := c.client(n1, "bob-b").Run(ctx, id, api.ExecRequest{Args: []string{"true"}}); !client.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("bob's exec in alice's sandbox: %v", err)
		}
	}
	if m := metricsOf(t, n1, c.tokens["ops"]); !strings.Contains(m, `cordon_requests_forwarded_total{node="n2",what="create"} 2`) || !strings.Contains(m, `cordon_requests_forwarded_total{node="n2",what="sandbox"}`) {
		t.Fatalf("n1's metrics of what it forwarded:\n%s", m)
	}
	list, err := c.client(n2, "alice-a").List(ctx)
	if err != nil || len(list) != 4 {
		t.Fatalf("list through n2: %d %v", len(list), err)
	}
	// The node that ran a forwarded command records who forwarded it, and
	// for which client.
	var remote string
	for id, node := range on {
		if node == "n2" {
			remote = id
		}
	}
	waitFor(t, "n2's record of the exec n1 forwarded", func() bool {
		for _, r := range readRecords(t, n2.log) {
			if d, ok := r.Data.(map[string]any); ok && r.Type == "api_request" && d["via"] == "n1" && d["path"] == "/v1/sandboxes/"+remote+"/exec" {
				return strings.HasPrefix(d["remote"].(string), "127.0.0.1:") && d["token"] == "alice-a"
			}
		}
		return false
	})
	// And n1 records where it sent it.
	waitFor(t, "n1's record of the exec it forwarded", func() bool {
		for _, r := range readRecords(t, n1.log) {
			if d, ok := r.Data.(map[string]any); ok && r.Type == "api_request" && d["forwarded_to"] == "n2" && d["path"] == "/v1/sandboxes/"+remote+"/exec" {
				return d["status"] == float64(200)
			}
		}
		return false
	})
	if _, err := alice.Kill(ctx, remote); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.client(n2, "alice-a").Get(ctx, remote); got.State != "ended" {
		t.Fatalf("after a kill through n1: %+v", got)
	}
}

func readRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil // nothing recorded yet
	}
	if err != nil {
		t.Fatal(err)
	}
	// The log may be read while it is written: what follows its last
	// newline is a record still being appended.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []audit.Record
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// A request that says another node forwarded it must carry that node's
// signature over exactly this request; anything else is refused.
func TestClusterForwardSignature(t *testing.T) {
	c := newCluster(t)
	n := c.start(t, "n1", nil)
	alice := c.client(n, "alice-a")
	sb, err := alice.Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/sandboxes/" + sb.ID
	auth := "Bearer " + c.tokens["alice-a"]
	send := func(secret []byte, method, signedURI, auth2 string, at time.Time, edit func(http.Header)) int {
		req, _ := http.NewRequest("GET", n.url+path, nil)
		req.Header.Set("Authorization", auth)
		signForward(secret, req.Header, "n2", "127.0.0.9:1", req.Host, method, signedURI, at)
		if auth2 != "" {
			req.Header.Set("Authorization", auth2) // signed over another caller's
		}
		if edit != nil {
			edit(req.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send(c.secret, "GET", path, "", time.Now(), nil); got != http.StatusOK {
		t.Fatalf("a well-signed forwarded request: %d", got)
	}
	bad := map[string]int{
		"another secret":  send([]byte(strings.Repeat("x", 32)), "GET", path, "", time.Now(), nil),
		"another method":  send(c.secret, "DELETE", path, "", time.Now(), nil),
		"another path":    send(c.secret, "GET", path+"/x", "", time.Now(), nil),
		"another caller":  send(c.secret, "GET", path, "Bearer "+c.tokens["bob-b"], time.Now(), nil),
		"another client":  send(c.secret, "GET", path, "", time.Now(), func(h http.Header) { h.Set(forwardedFor, "127.0.0.10:1") }),
		"another node":    send(c.secret, "GET", path, "", time.Now(), func(h http.Header) { h.Set(forwardedBy, "n3") }),
		"another host":    send(c.secret, "GET", path, "", time.Now(), func(h http.Header) { h.Set(forwardedHost, "elsewhere:1") }),
		"old":             send(c.secret, "GET", path, "", time.Now().Add(-2*forwardSkew), nil),
		"no signature":    send(c.secret, "GET", path, "", time.Now(), func(h http.Header) { h.Del(forwardedSig) }),
		"only the header": send(c.secret, "GET", path, "", time.Now(), func(h http.Header) { h.Del(forwardedSig); h.Del(forwardedAt); h.Del(forwardedFor) }),
	}
	for what, got := range bad {
		if got != http.StatusUnauthorized {
			t.Errorf("a forwarded request with %s: %d, want 401", what, got)
		}
	}
}

// A node silent past node_timeout is declared dead by one node; its
// sandboxes are reported ended (node_lost) through every node, and
// recorded so once.
func TestClusterNodeLost(t *testing.T) {
	c := newCluster(t)
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	ctx := context.Background()
	// A node that registers, holds a sandbox, and never beats again.
	if err := n1.db.Register(ctx, statedb.Node{Name: "ghost", Incarnation: "g", Advertise: "http://127.0.0.1:1"}, time.Second); err != nil {
		t.Fatal(err)
	}
	sb := api.Sandbox{ID: "sb-ghost", Agent: "a", State: "running", Node: "ghost", Expires: time.Now().Add(time.Hour)}
	if err := n1.db.PutSession(ctx, sb.ID, "ghost", "a", sb); err != nil {
		t.Fatal(err)
	}
	alice := c.client(n1, "alice-a")
	waitFor(t, "the ghost declared dead", func() bool {
		got, err := alice.Get(ctx, sb.ID)
		return err == nil && got.State == "ended" && got.Ended == endedNodeLost
	})
	if _, err := c.client(n2, "alice-a").Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); !client.IsStatus(err, http.StatusGone) || !strings.Contains(err.Error(), endedNodeLost) {
		t.Fatalf("exec in a lost sandbox: %v", err)
	}
	if g, err := n1.db.NodeByName(ctx, "ghost"); err != nil || (g.State != statedb.NodeDead && g.State != statedb.NodeLost) {
		t.Fatalf("the ghost: %+v %v", g, err)
	}
	ends := 0
	for _, n := range []*clusterNode{n1, n2} {
		for _, r := range readRecords(t, n.log) {
			if d, ok := r.Data.(map[string]any); ok && r.Type == "end" && r.Sandbox == sb.ID && d["reason"] == endedNodeLost {
				ends++
			}
		}
	}
	if ends != 1 {
		t.Fatalf("the lost sandbox's end was recorded %d times, want once", ends)
	}
	// The live nodes stay alive.
	for _, name := range []string{"n1", "n2"} {
		if n, err := n1.db.NodeByName(ctx, name); err != nil || n.State != statedb.NodeAlive {
			t.Fatalf("%s: %+v %v", name, n, err)
		}
	}
}

// A node the registry asks to drain is told (OnDrain) and gets no new
// sandboxes from the others; a second node of a live node's name is
// refused.
func TestClusterDrainAndNames(t *testing.T) {
	c := newCluster(t)
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	ctx := context.Background()
	if ok, err := n1.db.SetNodeState(ctx, "n1", "", statedb.NodeAlive, statedb.NodeDraining); !ok || err != nil {
		t.Fatalf("drain: %v %v", ok, err)
	}
	waitFor(t, "n1 told to drain", func() bool { return n1.drained.Load() == 1 })
	for i := 0; i < 2; i++ {
		sb, err := c.client(n2, "alice-a").Create(ctx, "")
		if err != nil || sb.Node != "n2" {
			t.Fatalf("a create while n1 drains: %+v %v", sb, err)
		}
	}
	// n2 is full and n1 drains: nowhere to go.
	if _, err := c.client(n2, "alice-a").Create(ctx, ""); !client.IsStatus(err, http.StatusTooManyRequests) {
		t.Fatalf("a create with n2 full and n1 draining: %v", err)
	}
	db, err := statedb.Open(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	again := func(name string) (*Server, error) {
		cfg := &Config{Agents: map[string]*Agent{}, Node: name, Cluster: Cluster{beat: 200 * time.Millisecond, timeout: 2 * time.Second}}
		return New(Options{Config: cfg, Audit: mustAudit(t), DB: db, Node: name, Start: func(*Agent, *profile.Profile, string) (Sandbox, error) { return nil, nil }})
	}
	if _, err := again("n2"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second node named n2: %v", err)
	}
	// A node killed outright stops beating: its next run takes its name
	// over without waiting for node_timeout.
	if err := db.Register(ctx, statedb.Node{Name: "killed", Incarnation: "k1"}, time.Second); err != nil {
		t.Fatal(err)
	}
	srv, err := again("killed")
	if err != nil {
		t.Fatalf("the next run of a killed node: %v", err)
	}
	srv.Close()
	if n, err := db.NodeByName(ctx, "killed"); err != nil || n.Incarnation == "k1" || n.State != statedb.NodeLeft {
		t.Fatalf("the killed node's row after its next run stopped: %+v %v", n, err)
	}
}

func mustAudit(t *testing.T) *audit.Log {
	al, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return al
}

// A node whose heartbeats only just began to succeed (it started, or the
// database came back) declares nobody dead: every node looks silent to
// the first one back after an outage.
func TestClusterNoDeathsAfterOutage(t *testing.T) {
	c := newCluster(t)
	n := c.start(t, "n1", func(cfg *Config) { cfg.Cluster.beat, cfg.Cluster.timeout = time.Hour, 3*time.Hour })
	ctx := context.Background()
	if err := n.db.Register(ctx, statedb.Node{Name: "quiet", Incarnation: "q"}, time.Second); err != nil {
		t.Fatal(err)
	}
	n.srv.opts.Config.Cluster.timeout = 100 * time.Millisecond // the ticker keeps its hour
	time.Sleep(150 * time.Millisecond)
	n.srv.beatingSince.Store(time.Now().UnixNano())
	if err := n.srv.sweepDead(ctx); err != nil {
		t.Fatal(err)
	}
	if q, _ := n.db.NodeByName(ctx, "quiet"); q.State != statedb.NodeAlive {
		t.Fatalf("declared dead by a node beating for less than node_timeout: %+v", q)
	}
	n.srv.beatingSince.Store(time.Now().Add(-time.Second).UnixNano())
	if err := n.srv.sweepDead(ctx); err != nil {
		t.Fatal(err)
	}
	if q, _ := n.db.NodeByName(ctx, "quiet"); q.State != statedb.NodeDead && q.State != statedb.NodeLost {
		t.Fatalf("not declared dead by a node beating for longer than node_timeout: %+v", q)
	}
}

// A node whose own heartbeat came late (it was paused, or the database
// was slow for every node) declares nobody dead until it has beaten on
// time for node_timeout again: a node silent for as long may only have
// been held up as it was.
func TestClusterLateBeatDeclaresNobody(t *testing.T) {
	c := newCluster(t)
	n := c.start(t, "n1", func(cfg *Config) { cfg.Cluster.beat, cfg.Cluster.timeout = time.Hour, 3*time.Hour })
	ctx := context.Background()
	if err := n.db.Register(ctx, statedb.Node{Name: "quiet", Incarnation: "q"}, time.Second); err != nil {
		t.Fatal(err)
	}
	// The ticker keeps its hour; heartbeat is called by hand. A beat is
	// late past max(node_timeout/2, two beats): two hours here.
	n.srv.opts.Config.Cluster.timeout = time.Second
	time.Sleep(1100 * time.Millisecond) // quiet is silent past node_timeout
	n.srv.beatingSince.Store(time.Now().Add(-time.Hour).UnixNano())
	n.srv.lastBeat.Store(time.Now().Add(-3 * time.Hour).UnixNano())
	if err := n.srv.heartbeat(); err != nil {
		t.Fatal(err)
	}
	if q, _ := n.db.NodeByName(ctx, "quiet"); q.State != statedb.NodeAlive {
		t.Fatalf("declared dead by a node whose own beat came late: %+v", q)
	}
	if since := time.Since(time.Unix(0, n.srv.beatingSince.Load())); since > 30*time.Minute {
		t.Fatalf("a late beat did not count as a miss: beating for %v", since)
	}
	// On time since node_timeout: it does.
	n.srv.beatingSince.Store(time.Now().Add(-time.Hour).UnixNano())
	n.srv.lastBeat.Store(time.Now().UnixNano())
	if err := n.srv.heartbeat(); err != nil {
		t.Fatal(err)
	}
	if q, _ := n.db.NodeByName(ctx, "quiet"); q.State != statedb.NodeDead && q.State != statedb.NodeLost {
		t.Fatalf("not declared dead by a node beating on time for longer than node_timeout: %+v", q)
	}
}

func metricsOf(t *testing.T, n *clusterNode, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", n.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// testLog is a node's log, in the test's.
type testLog struct {
	t    *testing.T
	name string
}

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s: %s", l.name, bytes.TrimSpace(p))
	return len(p), nil
}

// A node declared dead whose sandboxes the declaring node never ended (it
// stopped first) has them ended by another node, once.
func TestClusterLostAdopted(t *testing.T) {
	c := newCluster(t)
	n1 := c.start(t, "n1", nil)
	ctx := context.Background()
	if err := n1.db.Register(ctx, statedb.Node{Name: "orphan", Incarnation: "o"}, time.Second); err != nil {
		t.Fatal(err)
	}
	sb := api.Sandbox{ID: "sb-orphan", Agent: "a", State: "running", Node: "orphan", Expires: time.Now().Add(time.Hour)}
	if err := n1.db.PutSession(ctx, sb.ID, "orphan", "a", sb); err != nil {
		t.Fatal(err)
	}
	// Declared dead by a node that stopped before ending anything.
	if ok, err := n1.db.SetNodeState(ctx, "orphan", "o", statedb.NodeAlive, statedb.NodeDead); !ok || err != nil {
		t.Fatalf("%v %v", ok, err)
	}
	alice := c.client(n1, "alice-a")
	waitFor(t, "the orphan's sandbox ended", func() bool {
		got, err := alice.Get(ctx, sb.ID)
		return err == nil && got.State == "ended" && got.Ended == endedNodeLost
	})
	if o, _ := n1.db.NodeByName(ctx, "orphan"); o.State != statedb.NodeLost {
		t.Fatalf("the orphan after its sandboxes ended: %+v", o)
	}
	time.Sleep(300 * time.Millisecond) // more sweeps: nothing more is recorded
	ends := 0
	for _, r := range readRecords(t, n1.log) {
		if r.Type == "end" && r.Sandbox == sb.ID {
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("the orphan's sandbox's end was recorded %d times", ends)
	}
}
