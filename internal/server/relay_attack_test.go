package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// onNode creates a sandbox of alice through node n, where it stays (the
// receiving node wins a tie of room).
func (c *cluster) onNode(t *testing.T, n *clusterNode, node string) string {
	t.Helper()
	sb, err := c.client(n, "alice-a").Create(context.Background(), "")
	if err != nil || sb.Node != node {
		t.Fatalf("a create through %s: %+v %v", node, sb, err)
	}
	return sb.ID
}

// A request forwarded to a port of a sandbox on another node reaches the
// sandbox's server without the nodes' signature: the code in the sandbox
// learns neither the client's address nor the node's name, and holds no
// signature it could replay to pass as a forwarded request (past the
// token's rate, recorded as another node's).
func TestClusterPortForwardHidesSignature(t *testing.T) {
	hostile := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &portBox{fakeBox: &fakeBox{id: node + ":" + id, done: make(chan struct{})}, addr: hostile.ln.Addr().String()}
	}
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	id := c.onNode(t, n2, "n2")
	resp, err := c.client(n1, "alice-a").Port(context.Background(), id, 8080, "POST", "/hook", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cordon-Node") != "n2" {
		t.Fatalf("a port request forwarded to n2: %d %v", resp.StatusCode, resp.Header)
	}
	hostile.mu.Lock()
	heads := strings.Join(hostile.heads, "")
	hostile.mu.Unlock()
	if !strings.Contains(heads, "POST /hook") {
		t.Fatalf("the sandbox's server did not get the request: %q", heads)
	}
	if strings.Contains(strings.ToLower(heads), "cordon-forwarded") {
		// What the sandbox can do with it: send the same request to n2
		// itself, as if n1 forwarded it.
		req, _ := http.NewRequest("POST", n2.url+"/v1/sandboxes/"+id+"/ports/8080/hook", strings.NewReader("anything"))
		req.Header.Set("Authorization", "Bearer "+c.tokens["alice-a"])
		for _, line := range strings.Split(heads, "\r\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(strings.ToLower(k), "cordon-forwarded") {
				req.Header.Set(k, v)
			}
		}
		replayed := 0
		if r, err := http.DefaultClient.Do(req); err == nil {
			r.Body.Close()
			replayed = r.StatusCode
		}
		t.Fatalf("the sandbox's server got the forwarding headers (a replay of them to n2 answered %d):\n%s", replayed, heads)
	}
}

// streamBox streams a line of output every few milliseconds until its
// command's context ends.
type streamBox struct{ *fakeBox }

func (b *streamBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	for {
		select {
		case <-ctx.Done():
			code := 0
			return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}, nil
		case <-time.After(5 * time.Millisecond):
		}
		if e.Stdout != nil {
			fmt.Fprintf(e.Stdout, "%s\n", strings.Repeat("x", 4096))
		}
	}
}

// apiRequests returns the api_request records of a node's log for path.
func apiRequests(t *testing.T, n *clusterNode, method, path string) []map[string]any {
	var out []map[string]any
	for _, r := range readRecords(t, n.log) {
		if d, ok := r.Data.(map[string]any); ok && r.Type == "api_request" && d["path"] == path && d["method"] == method {
			out = append(out, d)
		}
	}
	return out
}

// A client that goes away in the middle of a forwarded answer (or a node
// that dies in the middle of one) does not take the request out of the
// forwarding node's audit log.
func TestClusterRelayAbortIsRecorded(t *testing.T) {
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &streamBox{&fakeBox{id: node + ":" + id, done: make(chan struct{})}}
	}
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	id := c.onNode(t, n2, "n2")
	path := "/v1/sandboxes/" + id + "/exec"
	conn, err := net.Dial("tcp", strings.TrimPrefix(n1.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"args":["yes"],"stream":true}`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: n1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, c.tokens["alice-a"], len(body), body)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("a streamed exec through n1: %q %v", status, err)
	}
	if _, err := io.ReadFull(br, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	// The client goes away mid-stream, resetting its connection.
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	waitFor(t, "n2's record of the exec", func() bool { return len(apiRequests(t, n2, "POST", path)) == 1 })
	waitFor(t, "n1's record of the exec it forwarded", func() bool {
		recs := apiRequests(t, n1, "POST", path)
		return len(recs) == 1 && recs[0]["forwarded_to"] == "n2"
	})
}

// rogueNode is a node of the registry that beats, has room for agent a,
// and answers with handler.
func rogueNode(t *testing.T, c *cluster, name string, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(handler)
	db, err := statedb.Open(context.Background(), c.db)
	if err != nil {
		t.Fatal(err)
	}
	load := statedb.Load{Agents: map[string]statedb.AgentLoad{"a": {Max: 100}}}
	if err := db.Register(context.Background(), statedb.Node{Name: name, Incarnation: "r", Advertise: ts.URL, Load: load}, time.Second); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			db.Heartbeat(context.Background(), name, "r", load)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		ts.Close()
		db.Close()
	})
	return ts
}

// A create placed on a node that breaks off its answer is no longer
// counted against that node's room once it ended, and is recorded.
func TestClusterRelayAbortedCreateIsPlaced(t *testing.T) {
	c := newCluster(t)
	n1 := c.start(t, "n1", nil)
	var got atomic.Int32
	rogueNode(t, c, "n3", func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"sb-`))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the node dies mid-answer
	})
	cl := c.client(n1, "alice-a")
	for i := 0; i < 3; i++ {
		if _, err := cl.Create(context.Background(), ""); err == nil {
			t.Fatalf("create %d: a broken answer was taken", i)
		}
	}
	if got.Load() != 3 {
		t.Fatalf("the rogue node got %d creates, want 3", got.Load())
	}
	n1.srv.relay.mu.Lock()
	pending := n1.srv.relay.pending["n3"]
	n1.srv.relay.mu.Unlock()
	if pending != 0 {
		t.Errorf("creates still counted pending on n3 after their answers broke off: %d", pending)
	}
	waitFor(t, "n1's records of the creates", func() bool {
		recs := apiRequests(t, n1, "POST", "/v1/sandboxes")
		n := 0
		for _, r := range recs {
			if r["forwarded_to"] == "n3" {
				n++
			}
		}
		return n == 3
	})
}

// An answer of a sandbox's server that breaks off is recorded, as the
// request that got it.
func TestPortAnswerBrokenOffIsRecorded(t *testing.T) {
	hostile := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &portBox{fakeBox: &fakeBox{id: node + ":" + id, done: make(chan struct{})}, addr: hostile.ln.Addr().String()}
	}
	n1 := c.start(t, "n1", nil)
	id := c.onNode(t, n1, "n1")
	resp, err := c.client(n1, "alice-a").Port(context.Background(), id, 8080, "GET", "/cut", nil)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("an answer that broke off came whole")
	}
	waitFor(t, "the records of the request", func() bool {
		var fwd, req bool
		for _, r := range readRecords(t, n1.log) {
			d, _ := r.Data.(map[string]any)
			switch {
			case r.Type == "port_forward" && d["path"] == "/cut":
				fwd = d["status"] == float64(200) && d["aborted"] == true
			case r.Type == "api_request" && d["path"] == "/v1/sandboxes/"+id+"/ports/8080/cut":
				req = d["status"] == float64(200) && d["aborted"] == true
			}
		}
		return fwd && req
	})
}

// A keyed request whose node was declared dead while it ran is answered
// as of unknown outcome, not "still running" for as long as the key is
// kept.
func TestClusterKeyOfLostNode(t *testing.T) {
	c := newCluster(t)
	n1 := c.start(t, "n1", nil)
	ctx := context.Background()
	// A node that took a keyed create, and died before it answered.
	if err := n1.db.Register(ctx, statedb.Node{Name: "ghost", Incarnation: "g", Advertise: "http://127.0.0.1:1"}, time.Second); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(digestable(api.CreateRequest{}))
	sum := sha256.Sum256(append([]byte("create\n"), body...))
	if _, fresh, err := n1.db.BeginKey(ctx, "a", "k1", hex.EncodeToString(sum[:]), "ghost", keyKeep); err != nil || !fresh {
		t.Fatalf("%v %v", fresh, err)
	}
	waitFor(t, "the ghost declared dead", func() bool {
		g, err := n1.db.NodeByName(ctx, "ghost")
		return err == nil && (g.State == statedb.NodeDead || g.State == statedb.NodeLost)
	})
	send := func() (int, string) {
		req, _ := http.NewRequest("POST", n1.url+"/v1/sandboxes", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+c.tokens["alice-a"])
		req.Header.Set(KeyHeader, "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var status int
	var msg string
	waitFor(t, "the key answered as lost", func() bool {
		status, msg = send()
		return status != http.StatusConflict
	})
	if status != http.StatusGone || !strings.Contains(msg, "ghost") {
		t.Fatalf("a retry of a create its lost node took: %d %s", status, msg)
	}
}

// A node that declares another dead keeps beating while it ends the dead
// node's sandboxes, however many they are: a slow ending does not get it
// declared dead in turn, and its own sandboxes ended.
func TestClusterEndingLostKeepsBeating(t *testing.T) {
	c := newCluster(t)
	// Beats as tight as the ending is long: ended inline, in the beat's
	// loop, the 6000 sandboxes keep a node silent past node_timeout.
	tight := func(cfg *Config) { cfg.Cluster.beat, cfg.Cluster.timeout = 50*time.Millisecond, 400*time.Millisecond }
	n1, n2 := c.start(t, "n1", tight), c.start(t, "n2", tight)
	ctx := context.Background()
	const many = 6000
	for i := 0; i < many; i++ {
		sb := api.Sandbox{ID: fmt.Sprintf("sb-%016x", i), Agent: "a", State: "running", Node: "ghost", Expires: time.Now().Add(time.Hour)}
		if err := n1.db.PutSession(ctx, sb.ID, "ghost", "a", sb); err != nil {
			t.Fatal(err)
		}
	}
	if err := n1.db.Register(ctx, statedb.Node{Name: "ghost", Incarnation: "g", Advertise: "http://127.0.0.1:1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		sess, err := n1.db.SessionByID(ctx, fmt.Sprintf("sb-%016x", many-1))
		if err == nil && strings.Contains(string(sess.Info), endedNodeLost) {
			break
		}
		if time.Now().After(deadline) {
			nodes, _ := n1.db.Nodes(ctx)
			t.Fatalf("the ghost's sandboxes not ended: %s %v; nodes %+v", sess.Info, err, nodes)
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, n := range []*clusterNode{n1, n2} {
		for _, r := range readRecords(t, n.log) {
			if d, ok := r.Data.(map[string]any); ok && r.Type == "node_lost" && d["node"] != "ghost" {
				t.Errorf("a live node was declared dead while the ghost's %d sandboxes were ended: %v", many, d)
			}
		}
	}
}

// A node declared dead that starts again under its name at once keeps
// the sandboxes of its new run: the node that declared it dead ends only
// the last run's.
func TestClusterLostNodeRestartsAtOnce(t *testing.T) {
	c := newCluster(t)
	n1 := c.start(t, "n1", func(cfg *Config) { cfg.Cluster.beat, cfg.Cluster.timeout = time.Hour, 3*time.Hour })
	ctx := context.Background()
	if err := n1.db.Register(ctx, statedb.Node{Name: "ghost", Incarnation: "g1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	old := api.Sandbox{ID: "sb-0000000000000001", Agent: "a", State: "running", Node: "ghost", Expires: time.Now().Add(time.Hour)}
	if err := n1.db.PutSession(ctx, old.ID, "ghost", "a", old); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if won, err := n1.db.DeclareDead(ctx, "ghost", "g1", 10*time.Millisecond); !won || err != nil {
		t.Fatalf("declaring the ghost dead: %v %v", won, err)
	}
	// Its next run takes the name over and starts a sandbox before the
	// declaring node has ended the last run's.
	if err := n1.db.Register(ctx, statedb.Node{Name: "ghost", Incarnation: "g2"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	fresh := api.Sandbox{ID: "sb-0000000000000002", Agent: "a", State: "running", Node: "ghost", Expires: time.Now().Add(time.Hour)}
	if err := n1.db.PutSession(ctx, fresh.ID, "ghost", "a", fresh); err != nil {
		t.Fatal(err)
	}
	if err := n1.srv.endLost(&lostNode{Node: statedb.Node{Name: "ghost", Incarnation: "g1", Age: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	sess, err := n1.db.SessionByID(ctx, fresh.ID)
	if err != nil || strings.Contains(string(sess.Info), endedNodeLost) {
		t.Fatalf("the new run's sandbox after the last run was declared dead: %s %v", sess.Info, err)
	}
}

// slowEndBox takes a while to end.
type slowEndBox struct {
	*fakeBox
	end time.Duration
}

func (b *slowEndBox) Close() {
	time.Sleep(b.end)
	b.fakeBox.Close()
}

// A node that stops cleanly, taking longer than node_timeout to end its
// sandboxes, leaves the registry as stopped: it is not declared dead
// meanwhile, nor are its sandboxes reported lost.
func TestClusterSlowStopIsNoDeath(t *testing.T) {
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		b := &fakeBox{id: node + ":" + id, done: make(chan struct{})}
		if node == "n2" {
			return &slowEndBox{fakeBox: b, end: time.Second}
		}
		return b
	}
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	id := c.onNode(t, n2, "n2")
	time.Sleep(500 * time.Millisecond) // n1 has beaten for node_timeout
	n2.srv.Close()
	ctx := context.Background()
	if n, err := n1.db.NodeByName(ctx, "n2"); err != nil || n.State != statedb.NodeLeft {
		t.Errorf("n2 after it stopped: %+v %v", n, err)
	}
	for _, r := range readRecords(t, n1.log) {
		if r.Type == "node_lost" || r.Sandbox == id {
			t.Errorf("n1 recorded, of n2 that stopped cleanly: %s %v", r.Type, r.Data)
		}
	}
	if sess, err := n1.db.SessionByID(ctx, id); err != nil || !strings.Contains(string(sess.Info), "server_stopped") {
		t.Errorf("n2's sandbox after n2 stopped: %s %v", sess.Info, err)
	}
}

// A node whose name another run took over (it looked gone for three
// beats: stopped, or its machine paused) ends its sandboxes and stops,
// rather than go on serving under a name that is not its own.
func TestClusterNameTakenOverStops(t *testing.T) {
	c := newCluster(t)
	n1 := c.start(t, "n1", nil)
	id := c.onNode(t, n1, "n1")
	ctx := context.Background()
	if err := n1.db.Register(ctx, statedb.Node{Name: "n1", Incarnation: "next"}, 0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n1.db.Heartbeat(ctx, "n1", "next", statedb.Load{})
		}
	}()
	defer func() { close(stop); <-done }()
	waitFor(t, "n1 told to stop", func() bool { return n1.drained.Load() == 1 })
	if got, err := c.client(n1, "alice-a").Get(ctx, id); err != nil || got.State != "ended" {
		t.Fatalf("n1's sandbox once its name was taken over: %+v %v", got, err)
	}
	if n, err := n1.db.NodeByName(ctx, "n1"); err != nil || n.Incarnation != "next" || n.State != statedb.NodeAlive {
		t.Fatalf("the run that took the name over: %+v %v", n, err)
	}
}

// Every route for a sandbox answers as openapi.yaml says when the node
// that holds it does not answer (502), and every route answers a request
// with a bad forwarding signature as it says: public ones as to anyone,
// the others 401.
func TestClusterAnswersConform(t *testing.T) {
	c := newCluster(t)
	n1 := c.start(t, "n1", nil)
	// A node that holds a sandbox of alice's, beats, and refuses every
	// connection.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	ctx := context.Background()
	load := statedb.Load{Agents: map[string]statedb.AgentLoad{"a": {Max: 0}}}
	if err := n1.db.Register(ctx, statedb.Node{Name: "far", Incarnation: "f", Advertise: "http://" + addr, Load: load}, time.Second); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n1.db.Heartbeat(ctx, "far", "f", load)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	sb := api.Sandbox{ID: "sb-0123456789abcdef", Agent: "a", State: "running", Node: "far", Expires: time.Now().Add(time.Hour)}
	if err := n1.db.PutSession(ctx, sb.ID, "far", "a", sb); err != nil {
		t.Fatal(err)
	}
	p := "/v1/sandboxes/" + sb.ID
	for _, rt := range []struct{ method, path string }{
		{"GET", p}, {"DELETE", p}, {"POST", p + "/keepalive"}, {"POST", p + "/exec"}, {"GET", p + "/files?path=/x"},
		{"PUT", p + "/files?path=/x"}, {"GET", p + "/files/list?path=/"}, {"GET", p + "/files/tar?path=/"}, {"PUT", p + "/files/tar?path=/"},
		{"GET", p + "/terminal"}, {"GET", p + "/changes"}, {"GET", p + "/changes/diff"}, {"POST", p + "/apply"}, {"POST", p + "/discard"},
		{"GET", p + "/ports/80/x"}, {"POST", p + "/ports/80/x"}, {"DELETE", p + "/ports/80/x"},
	} {
		req, _ := http.NewRequest(rt.method, n1.url+rt.path, strings.NewReader(`{"args":["true"]}`))
		req.Header.Set("Authorization", "Bearer "+c.tokens["alice-a"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s %s with its node unreachable: %d, want 502", rt.method, rt.path, resp.StatusCode)
		}
	}
	// A public route answers as to anyone; any other refuses a request
	// with a signature that does not verify.
	for _, path := range []string{"/v1/health", "/v1/openapi.yaml"} {
		req, _ := http.NewRequest("GET", n1.url+path, nil)
		req.Header.Set(forwardedBy, "n9")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a bad signature: %d, want 200", path, resp.StatusCode)
		}
	}
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/sandboxes"}, {"POST", "/v1/sandboxes"},
		{"GET", "/v1/approvals"}, {"GET", "/v1/audit"}, {"GET", "/metrics"}, {"POST", "/v1/mcp"},
		{"GET", "/v1/approvals/x"}, {"POST", "/v1/approvals/x/approve"}, {"POST", "/v1/approvals/x/deny"},
	} {
		req, _ := http.NewRequest(rt.method, n1.url+rt.path, nil)
		req.Header.Set(forwardedBy, "n9")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with a bad signature: %d, want 401", rt.method, rt.path, resp.StatusCode)
		}
	}
}

// A terminal opens through the node that forwards it, from a client that
// sends an Origin of the address it dialed (as many WebSocket libraries
// do).
func TestClusterTerminalForwarded(t *testing.T) {
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &termBox{&fakeBox{id: node + ":" + id, done: make(chan struct{})}}
	}
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	id := c.onNode(t, n2, "n2")
	for _, origin := range []string{"", n1.url} {
		h := http.Header{"Authorization": {"Bearer " + c.tokens["alice-a"]}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(n1.url, "http")+"/v1/sandboxes/"+id+"/terminal?arg=hello", &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			cancel()
			t.Fatalf("a terminal through n1 (Origin %q): %d %v", origin, status, err)
		}
		var out strings.Builder
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				break
			}
			if typ == websocket.MessageBinary {
				out.Write(b)
			}
		}
		ws.CloseNow()
		cancel()
		if !strings.Contains(out.String(), "n2:"+id+" ran hello") {
			t.Fatalf("the terminal's output through n1 (Origin %q): %q", origin, out.String())
		}
	}
}

// termBox runs a terminal's command: it says what it ran, and ends
// without waiting for input.
type termBox struct{ *fakeBox }

func (b *termBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	e.Stdin = nil
	return b.fakeBox.Exec(ctx, e)
}

// A request whose forwarding signature does not verify is counted
// against its caller's rate as any other, before it is refused.
func TestClusterBadSignatureCounted(t *testing.T) {
	c := newCluster(t)
	n := c.start(t, "n1", func(cfg *Config) { cfg.RateLimit.Token = Rate{Rate: 0.001, Burst: 3} })
	var got []int
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest("GET", n.url+"/v1/sandboxes", nil)
		req.Header.Set("Authorization", "Bearer "+c.tokens["alice-a"])
		req.Header.Set(forwardedBy, "n9")
		req.Header.Set(forwardedSig, "00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != "[401 401 401 429 429]" {
		t.Fatalf("requests with a bad signature past the token's rate: %v", got)
	}
}

// slowBox's commands are silent for a while between lines.
type slowBox struct {
	*fakeBox
	gap time.Duration
}

func (b *slowBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	for i := 0; i < 3; i++ {
		select {
		case <-ctx.Done():
			return outcome.Outcome{}, ctx.Err()
		case <-time.After(b.gap):
		}
		if e.Stdout != nil {
			fmt.Fprintf(e.Stdout, "line %d\n", i)
		}
	}
	code := 0
	return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code, Message: "ok"}, nil
}

// A command silent for longer than write_timeout, streamed or not, runs
// through the node that forwards it as it runs on its own node.
func TestClusterSilentCommandForwarded(t *testing.T) {
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &slowBox{fakeBox: &fakeBox{id: node + ":" + id, done: make(chan struct{})}, gap: 700 * time.Millisecond}
	}
	tweak := func(cfg *Config) { cfg.HTTP.WriteTimeout, cfg.HTTP.BodyTimeout = "300ms", "300ms" }
	n1, n2 := c.start(t, "n1", tweak), c.start(t, "n2", tweak)
	id := c.onNode(t, n2, "n2")
	ctx := context.Background()
	res, err := c.client(n1, "alice-a").Run(ctx, id, api.ExecRequest{Args: []string{"slow"}})
	if err != nil || string(res.Stdout) != "line 0\nline 1\nline 2\n" {
		t.Fatalf("a silent command through n1: %q %v", res.Stdout, err)
	}
	var out strings.Builder
	o, err := c.client(n1, "alice-a").Exec(ctx, id, api.ExecRequest{Args: []string{"slow"}}, &out, io.Discard)
	if err != nil || o.Status != "ok" || out.String() != "line 0\nline 1\nline 2\n" {
		t.Fatalf("a silent streamed command through n1: %q %+v %v", out.String(), o, err)
	}
}

// A keyed create placed on another node is answered again, the same
// sandbox, when sent again through any node.
func TestClusterKeyedCreateAnyNode(t *testing.T) {
	c := newCluster(t)
	// n2 has more room for alice: n1's creates go there.
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", func(cfg *Config) { cfg.Agents["a"].MaxSandboxes = 4 })
	waitFor(t, "n2's room known", func() bool {
		n, err := n1.db.NodeByName(context.Background(), "n2")
		return err == nil && n.Load.Agents["a"].Max == 4
	})
	send := func(n *clusterNode) (api.Sandbox, http.Header) {
		req, _ := http.NewRequest("POST", n.url+"/v1/sandboxes", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+c.tokens["alice-a"])
		req.Header.Set(KeyHeader, "once")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb api.Sandbox
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("a keyed create through %s: %d %v", n.url, resp.StatusCode, err)
		}
		return sb, resp.Header
	}
	first, _ := send(n1)
	if first.Node != "n2" {
		t.Fatalf("the create went to %s, want n2", first.Node)
	}
	for _, n := range []*clusterNode{n1, n2} {
		again, h := send(n)
		if again.ID != first.ID || h.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the keyed create sent again: %+v %v", again, h)
		}
	}
}

// A path and query reach the sandbox of another node through the node
// that forwards them as they reach it sent to its own node (the signature
// covers them as sent), and a request line naming another host goes to
// the sandbox's node all the same.
func TestClusterForwardsAnyURL(t *testing.T) {
	hostile := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &portBox{fakeBox: &fakeBox{id: node + ":" + id, done: make(chan struct{})}, addr: hostile.ln.Addr().String()}
	}
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	id := c.onNode(t, n2, "n2")
	get := func(n *clusterNode, target string) string {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", target, c.tokens["alice-a"])
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s through %s: %d", target, n.url, resp.StatusCode)
		}
		hostile.mu.Lock()
		defer hostile.mu.Unlock()
		return strings.SplitN(hostile.heads[len(hostile.heads)-1], "\r\n", 2)[0]
	}
	for _, path := range []string{
		"/%C3%A9%25%20%7e?q=%20&r=%2F&&s=%C3%A9",
		"/x+~!$&'()*,=:@",
		"/p?%00",
	} {
		target := "/v1/sandboxes/" + id + "/ports/8080" + path
		if direct, forwarded := get(n2, target), get(n1, target); direct != forwarded {
			t.Errorf("%s: %q sent to n2, %q through n1", target, direct, forwarded)
		}
	}
	if got := get(n1, "http://127.0.0.2:9/v1/sandboxes/"+id+"/ports/8080/absolute"); got != "GET /absolute HTTP/1.1" {
		t.Errorf("a request line naming another host, through n1: %q", got)
	}
}
