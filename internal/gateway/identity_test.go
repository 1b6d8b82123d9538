package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// bearer adds a token (and an Origin, when set) to every request.
type bearer struct {
	token, origin string
	scheme        string // "" is "Bearer"
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		scheme := b.scheme
		if scheme == "" {
			scheme = "Bearer"
		}
		r.Header.Set("Authorization", scheme+" "+b.token)
	}
	if b.origin != "" {
		r.Header.Set("Origin", b.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// serveHTTP serves the gateway over HTTP to the clients whose token is
// "token-NAME" (for the client NAME).
func serveHTTP(t *testing.T, g *gateway.Gateway, origins ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	h, err := g.HTTPHandler(gateway.HTTPOptions{
		Identify: func(tok string) (string, bool) {
			name, ok := strings.CutPrefix(tok, "token-")
			return name, ok && name != ""
		},
		Addr:    srv.Listener.Addr().String(),
		Origins: origins,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() {
		// A session's standing GET may outlive its client's Close (the
		// client opens it in the background): cut every connection, or
		// Close waits for that request for ever.
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// connectAs is a new session of the client name, over HTTP.
func (f *fixture) connectAs(t *testing.T, name string) *mcp.ClientSession {
	t.Helper()
	f.mu.Lock()
	if f.http == nil {
		f.http = serveHTTP(t, f.g)
	}
	srv := f.http
	f.mu.Unlock()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{token: "token-" + name}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// events are the recorded events of a type.
func (f *fixture) events(typ string) []audit.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []audit.Event
	for _, e := range f.evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// A new session does not launder what the agent read, nor renew its
// budgets: every session of one client shares them.
func TestSessionsOfAnAgentShareLabelsAndBudgets(t *testing.T) {
	f := pinned(t)
	a := f.connectAs(t, "alice")
	if _, isErr := call(t, a, "read_file", `{"path": "secrets/key"}`); isErr {
		t.Fatal("read_file refused")
	}
	b := f.connectAs(t, "alice")
	if text, isErr := call(t, b, "fetch", `{"url": "https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("fetch in another session of the agent that read a secret: %v %q", isErr, text)
	}
	a.Close()
	if text, isErr := call(t, f.connectAs(t, "alice"), "fetch", `{"url": "https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("fetch after the reading session ended: %v %q", isErr, text)
	}
	// Another client is another agent.
	if text, isErr := call(t, f.connectAs(t, "bob"), "fetch", `{"url": "https://example.org/"}`); isErr {
		t.Errorf("fetch of another agent: %q", text)
	}

	// Budgets: two calls for the agent, whatever its sessions.
	p, err := profile.Parse("budget.yaml", []byte("version: 1\nagent: tester\nsession:\n  calls: 2\ntools:\n  read_file:\n    class: read\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), gateway.Config{Profile: p, Resolve: fakeResolve(nil), Run: func(context.Context, string, json.RawMessage) ([]byte, bool, error) {
		return []byte(`"ok"`), false, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := serveHTTP(t, g)
	session := func(name string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{token: "token-" + name}}, MaxRetries: -1}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	for i := range 2 {
		if text, isErr := call(t, session("carol"), "read_file", `{"path": "a"}`); isErr {
			t.Fatalf("call %d: %q", i+1, text)
		}
	}
	if text, isErr := call(t, session("carol"), "read_file", `{"path": "a"}`); !isErr || !strings.Contains(text, "session.calls") {
		t.Errorf("a third call, in a third session: %v %q", isErr, text)
	}
	if text, isErr := call(t, session("dave"), "read_file", `{"path": "a"}`); isErr {
		t.Errorf("another agent's first call: %q", text)
	}
}

// The budgets of an agent last the profile's session.wall; then its next
// call starts them anew, with the labels it carried (the agent still holds
// what it read).
func TestAgentStateLastsTheWall(t *testing.T) {
	p, err := profile.Parse("wall.yaml", []byte("version: 1\nagent: tester\nsession:\n  wall: 300ms\n  steps: 3\ntools:\n  read_file:\n    class: read\n    labels:\n      - arg: path\n        prefix: secrets/\n        labels: [secret]\n  fetch:\n    class: external\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), gateway.Config{Profile: p, Resolve: fakeResolve(nil), Run: func(context.Context, string, json.RawMessage) ([]byte, bool, error) {
		return []byte(`"ok"`), false, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	f := &fixture{g: g}
	call(t, f.connect(t), "read_file", `{"path": "secrets/k"}`)
	if _, isErr := call(t, f.connect(t), "fetch", `{"url": "https://example.org/"}`); !isErr {
		t.Error("fetch within the wall, after a secret, was allowed")
	}
	call(t, f.connect(t), "read_file", `{"path": "x"}`)
	if text, isErr := call(t, f.connect(t), "read_file", `{"path": "x"}`); !isErr || !strings.Contains(text, "session.steps") {
		t.Errorf("a fourth step of three: %v %q", isErr, text)
	}
	time.Sleep(400 * time.Millisecond)
	if text, isErr := call(t, f.connect(t), "read_file", `{"path": "x"}`); isErr {
		t.Errorf("a step after the wall: %q", text)
	}
	if text, isErr := call(t, f.connect(t), "fetch", `{"url": "https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("fetch after the wall, the secret read before it: %v %q", isErr, text)
	}
}

// The states kept are bounded; a full gateway refuses a new agent rather
// than forget what an agent read.
func TestAgentStatesAreBounded(t *testing.T) {
	defer gateway.SetMaxStates(2)()
	f := pinned(t)
	a := f.connectAs(t, "a")
	call(t, a, "read_file", `{"path": "secrets/key"}`)
	call(t, f.connectAs(t, "b"), "read_file", `{"path": "x"}`)
	if text, isErr := call(t, f.connectAs(t, "c"), "read_file", `{"path": "x"}`); !isErr || !strings.Contains(text, "at most 2 agents") {
		t.Errorf("a third agent: %v %q", isErr, text)
	}
	if text, isErr := call(t, f.connectAs(t, "a"), "fetch", `{"url": "https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("the first agent, once the gateway was full: %v %q", isErr, text)
	}
}

func TestHTTPNeedsAClientTokenAndAnAllowedOrigin(t *testing.T) {
	f := pinned(t)
	srv := serveHTTP(t, f.g, "https://ide.example:8443")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func(token, origin string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := (&http.Client{Transport: bearer{token: token, origin: origin}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		token, origin string
		want          int
	}{
		{"", "", http.StatusUnauthorized},
		{"nobody", "", http.StatusUnauthorized},
		{"token-", "", http.StatusUnauthorized},
		{"token-alice", "", http.StatusOK},
		{"token-alice", "http://evil.example", http.StatusForbidden},
		{"token-alice", "null", http.StatusForbidden},
		{"token-alice", srv.URL + ".evil.example", http.StatusForbidden},
		{"", "http://evil.example", http.StatusForbidden},
		{"token-alice", srv.URL, http.StatusOK},
		{"token-alice", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), http.StatusOK},
		{"token-alice", "https://IDE.example:8443", http.StatusOK},
		{"token-alice", "https://ide.example", http.StatusForbidden},
	} {
		if got := post(c.token, c.origin); got != c.want {
			t.Errorf("token %q, origin %q: %d, want %d", c.token, c.origin, got, c.want)
		}
	}
	if _, err := f.g.HTTPHandler(gateway.HTTPOptions{Identify: func(string) (string, bool) { return "", false }, Origins: []string{"ide.example"}}); err == nil {
		t.Error("an origin without a scheme was taken")
	}
	if _, err := f.g.HTTPHandler(gateway.HTTPOptions{}); err == nil {
		t.Error("a handler without clients' tokens was made")
	}

	// A session is served only to the client that opened it.
	cs := f.connectAs(t, "alice")
	req, _ := http.NewRequest("POST", f.http.URL, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := (&http.Client{Transport: bearer{token: "token-mallory"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if cs.ID() == "" || res.StatusCode != http.StatusForbidden {
		t.Errorf("another client in alice's session %q: %d", cs.ID(), res.StatusCode)
	}
}

// A client has a bounded number of sessions open at once, however it
// spells the scheme of its token (the SDK's verifier takes any case);
// another client is not held back by it, and an ended session frees its
// place.
func TestClientSessionsAreBounded(t *testing.T) {
	defer gateway.SetMaxClientSessions(2)()
	f := pinned(t)
	srv := serveHTTP(t, f.g)
	scheme := ""
	open := func(name string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{token: "token-" + name, scheme: scheme}}, MaxRetries: -1}
		return mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	}
	scheme = "bearer"
	a1, err := open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Close()
	scheme = "BEARER"
	a2, err := open("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme = range []string{"Bearer", "bearer", "bEaReR"} {
		if _, err := open("a"); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Errorf("a third session of a client, as %q: %v", scheme, err)
		}
	}
	scheme = ""
	b, err := open("b")
	if err != nil {
		t.Fatalf("another client: %v", err)
	}
	b.Close()
	a2.Close()
	a3, err := open("a")
	if err != nil {
		t.Fatalf("a session after one ended: %v", err)
	}
	a3.Close()
}

// rawClient speaks JSON-RPC to the gateway itself, as a hostile agent
// would, and keeps every byte it is sent.
type rawClient struct {
	t    *testing.T
	conn mcp.Connection
	seen strings.Builder
}

func (f *fixture) raw(t *testing.T) *rawClient {
	t.Helper()
	a, b := mcp.NewInMemoryTransports()
	if _, err := f.g.Server().Connect(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := b.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{t: t, conn: conn}
	c.send(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	c.reply(1)
	c.send(0, "notifications/initialized", `{}`)
	return c
}

// send sends a request (id > 0) or a notification.
func (c *rawClient) send(id int64, method, params string) {
	c.t.Helper()
	req := &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}
	if id > 0 {
		req.ID, _ = jsonrpc.MakeID(float64(id))
	}
	if err := c.conn.Write(context.Background(), req); err != nil {
		c.t.Fatal(err)
	}
}

// reply reads until the response to id, and returns its result.
func (c *rawClient) reply(id int64) map[string]any {
	c.t.Helper()
	want, _ := jsonrpc.MakeID(float64(id))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		msg, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("waiting for the reply to %d: %v", id, err)
		}
		b, _ := jsonrpc.EncodeMessage(msg)
		c.seen.Write(b)
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == want {
			if r.Error != nil {
				c.t.Fatalf("reply to %d: %v", id, r.Error)
			}
			var out map[string]any
			json.Unmarshal(r.Result, &out)
			return out
		}
	}
}

func resultText(res map[string]any) string {
	b, _ := json.Marshal(res["content"])
	return string(b)
}

// The agent cannot answer its own held call (queue mode): not by
// cancelling it to learn its request's id (it is never shown), and not by
// naming the request in an answer of its own.
func TestAgentCannotAnswerItsOwnApproval(t *testing.T) {
	f := pinned(t)
	c := f.raw(t)
	c.send(2, "tools/call", `{"name":"up__pay","arguments":{"amount":90}}`)
	req := pending(t, f.store)
	c.send(0, "notifications/cancelled", `{"requestId":2}`)
	res := c.reply(2)
	if text := resultText(res); res["isError"] != true || !strings.Contains(text, "the call was cancelled while it waited for approval") || strings.Contains(text, "session ended") {
		t.Errorf("cancelled, the session alive: %v", res)
	}
	// The agent knows the id anyway (say it guessed it): its answer, in
	// either form, is refused, recorded, and runs nothing.
	for i, params := range []string{
		`{"name":"up__pay","arguments":{"amount":90},"requestState":"cordon-approval:` + req.ID + `","inputResponses":{"approval":{"action":"accept","content":{"approve":true}}}}`,
		`{"name":"up__pay","arguments":{"amount":90},"inputResponses":{"approval":{"action":"accept","content":{"approve":true}}}}`,
		`{"name":"up__pay","arguments":{"amount":90},"requestState":"` + req.ID + `"}`,
	} {
		id := int64(3 + i)
		c.send(id, "tools/call", params)
		res = c.reply(id)
		if text := resultText(res); res["isError"] != true || !strings.Contains(text, "never by an answer in a tool call; the call was not made") {
			t.Errorf("answer %d: %v", i, res)
		}
	}
	if n := len(f.events("approval_self_answer")); n != 3 {
		t.Errorf("%d approval_self_answer events, want 3", n)
	}
	if it, _ := f.store.Get(req.ID); it.State != approvals.Pending || it.By != "" {
		t.Errorf("the request after the agent's answers: %s by %q", it.State, it.By)
	}
	if f.payments() != 0 {
		t.Errorf("%d payments, want none", f.payments())
	}
	if strings.Contains(c.seen.String(), req.ID) {
		t.Errorf("the agent was shown the request's id %s: %s", req.ID, c.seen.String())
	}
}

// Nothing the agent is shown about a held call names its request.
func TestRequestIDsAreNotShown(t *testing.T) {
	f := pinned(t, "1s", "queue")
	c := f.raw(t)
	c.send(2, "tools/call", `{"name":"up__pay","arguments":{"amount":90}}`)
	first := resultText(c.reply(2))
	c.send(3, "tools/call", `{"name":"up__pay","arguments":{"amount":91}}`)
	req := pending(t, f.store)
	f.store.Decide(req.ID, false, "alice", "no", approvals.ScopeCall)
	c.reply(3)
	items, _ := f.store.List()
	if len(items) != 2 || !strings.Contains(first, "not decided within 1s") {
		t.Fatalf("requests %v; first answer %s", items, first)
	}
	for _, it := range items {
		if strings.Contains(c.seen.String(), it.ID) {
			t.Errorf("the agent was shown the id of request %s (%s): %s", it.ID, it.State, c.seen.String())
		}
	}
}

// In elicitation mode an answer counts only for a question the gateway
// put to that session, for that call, once.
func TestElicitationAnswersOnlyTheQuestionPut(t *testing.T) {
	f := pinned(t, "1m", "elicitation")
	elicit := `{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}`
	connect := func() *rawClient {
		a, b := mcp.NewInMemoryTransports()
		if _, err := f.g.Server().Connect(context.Background(), a, nil); err != nil {
			t.Fatal(err)
		}
		conn, err := b.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := &rawClient{t: t, conn: conn}
		c.send(1, "initialize", elicit)
		c.reply(1)
		c.send(0, "notifications/initialized", `{}`)
		return c
	}
	accept := `"inputResponses":{"approval":{"action":"accept","content":{"approve":true}}}`

	// An answer given before any question was put.
	a := connect()
	a.send(2, "tools/call", `{"name":"up__pay","arguments":{"amount":90},`+accept+`}`)
	if res := a.reply(2); res["isError"] != true || !strings.Contains(resultText(res), "not put to this session for this call") {
		t.Errorf("an answer without a question: %v", res)
	}
	if items, _ := f.store.List(); len(items) != 0 {
		t.Errorf("requests after an unasked answer: %v", items)
	}

	// The question of a call put to a client of an older protocol comes as
	// an elicitation request; the answer of another session, or to another
	// call, is refused.
	b := connect()
	b.send(3, "tools/call", `{"name":"up__pay","arguments":{"amount":90}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var elicitID jsonrpc.ID
	for {
		msg, err := b.conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "elicitation/create" {
			elicitID = r.ID
			break
		}
	}
	req := pending(t, f.store)
	for i, params := range []string{
		`{"name":"up__pay","arguments":{"amount":90},"requestState":"` + req.ID + `",` + accept + `}`,
		`{"name":"up__pay","arguments":{"amount":91},"requestState":"anything",` + accept + `}`,
	} {
		a.send(int64(10+i), "tools/call", params)
		if res := a.reply(int64(10 + i)); res["isError"] != true || !strings.Contains(resultText(res), "not put to this session for this call") {
			t.Errorf("answer %d from another session: %v", i, res)
		}
	}
	if it, _ := f.store.Get(req.ID); it.State != approvals.Pending || f.payments() != 0 {
		t.Fatalf("after answers from another session: %s, %d payments", it.State, f.payments())
	}
	// The session asked answers: the call runs, once.
	if err := b.conn.Write(context.Background(), &jsonrpc.Response{ID: elicitID, Result: json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"fine"}}`)}); err != nil {
		t.Fatal(err)
	}
	if res := b.reply(3); res["isError"] == true {
		t.Errorf("the answered call: %v", res)
	}
	if f.payments() != 1 {
		t.Errorf("%d payments, want 1", f.payments())
	}
	if n := len(f.events("approval_self_answer")); n != 3 {
		t.Errorf("%d approval_self_answer events, want 3", n)
	}
}
