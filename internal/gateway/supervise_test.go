package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// server is an upstream server of the tests that can be started anew
// (dial), crash (its connections end) or fail to start.
type server struct {
	s     *mcp.Server
	mu    sync.Mutex
	conns []*mcp.ServerSession
	dials int
	fail  error
	// entered is told when a call of slow has begun; unstick ends the
	// calls of slow in flight (see crash).
	entered chan struct{}
	unstick chan struct{}
	// remote, when set, makes the transports instead.
	remote func() (mcp.Transport, error)
}

func newServer() *server {
	sv := &server{s: mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil), entered: make(chan struct{}, 1), unstick: make(chan struct{})}
	addTool(sv.s, fullTool())
	slow := fullTool()
	slow.Name = "slow"
	sv.s.AddTool(slow, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sv.entered <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-sv.unstick:
			return nil, errors.New("the server is gone")
		}
	})
	return sv
}

func (sv *server) dial() (mcp.Transport, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.dials++
	if sv.fail != nil {
		return nil, sv.fail
	}
	if sv.remote != nil {
		return sv.remote()
	}
	a, b := mcp.NewInMemoryTransports()
	ss, err := sv.s.Connect(context.Background(), a, nil)
	if err != nil {
		return nil, err
	}
	sv.conns = append(sv.conns, ss)
	return b, nil
}

// crash ends the server's connections, as its exit would. A session's
// Close waits for its calls in flight, whose context it may cancel only
// once it is done: a call of slow still running a second later is ended,
// so that the crash never waits without end.
func (sv *server) crash() {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		for _, ss := range sv.conns {
			ss.Close()
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
		select {
		case <-sv.unstick:
		default:
			close(sv.unstick)
		}
		<-closed
	}
	sv.conns = nil
}

func (sv *server) dialed() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.dials
}

// pinOfT is the pin of up__t as newServer offers it.
func pinOfT(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	addTool(s, fullTool())
	return statusOf(t, pinGateway(t, s, ""), "up__t").Hash
}

// superviseGateway is a gateway in front of the servers, each with its
// tools t and slow declared and pinned (a tool's pin covers its name).
func superviseGateway(t *testing.T, servers map[string]*server, r gateway.Restart) *gateway.Gateway {
	t.Helper()
	tmpl := fullTool()
	yaml := "version: 1\nagent: tester\ntools:\n"
	dial := map[string]func() (mcp.Transport, error){}
	for name, sv := range servers {
		for _, tool := range []string{"t", "slow"} {
			tmpl.Name = name + "__" + tool
			yaml += fmt.Sprintf("  %s:\n    class: read\n    pin: %s\n", tmpl.Name, gateway.Hash(servedAs(t, tmpl)))
		}
		dial[name] = sv.dial
	}
	yaml += "servers:\n"
	for name := range servers {
		yaml += "  " + name + ":\n    command: [unused]\n    profile: unused.yaml\n"
	}
	p, err := profile.Parse("sup.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	var mu sync.Mutex
	g, err := gateway.New(context.Background(), gateway.Config{Profile: p, Dial: dial, Restart: r, Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// servedAs is def as a client decodes it from a listing.
func servedAs(t *testing.T, def *mcp.Tool) *mcp.Tool {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	addTool(s, def)
	a, b := mcp.NewInMemoryTransports()
	if _, err := s.Connect(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 {
		t.Fatal(res, err)
	}
	return res.Tools[0]
}

// stepWaits is a Restart whose waits are steps of the test: each wait is
// sent on waits and lasts until release.
func stepWaits() (gateway.Restart, chan time.Duration, chan struct{}) {
	waits, release := make(chan time.Duration), make(chan struct{})
	return gateway.Restart{Wait: func(ctx context.Context, d time.Duration) error {
		select {
		case waits <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}, waits, release
}

// A server that crashes is withdrawn while it is down (the agent is told
// the list changed, and its calls are refused saying why) and restarted;
// its tools come back with it.
func TestCrashedServerIsRestarted(t *testing.T) {
	sv := newServer()
	r, waits, release := stepWaits()
	g := superviseGateway(t, map[string]*server{"up": sv}, r)
	changed := make(chan struct{}, 10)
	a, b := mcp.NewInMemoryTransports()
	if _, err := g.Server().Connect(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(context.Background(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := toolNames(t, cs); !slices.Equal(got, []string{"up__slow", "up__t"}) {
		t.Fatalf("tools = %v", got)
	}
	if text, isErr := call(t, cs, "up__t", `{}`); isErr || text != "done" {
		t.Fatalf("up__t: %v %q", isErr, text)
	}
	for len(changed) > 0 {
		<-changed
	}

	sv.crash()
	if d := <-waits; d != 500*time.Millisecond {
		t.Errorf("first wait %v, want 500ms", d)
	}
	// Down: withdrawn, the agent told so, and refused with the reason.
	if got := toolNames(t, cs); len(got) != 0 {
		t.Errorf("tools while down = %v", got)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Error("no list-changed notification when the server went down")
	}
	text, isErr := call(t, cs, "up__t", `{}`)
	if !isErr || !strings.Contains(text, "rule servers.up") || !strings.Contains(text, "unavailable: server up is down (restarting)") {
		t.Errorf("call while down: %v %q", isErr, text)
	}
	if st := g.Servers(); len(st) != 1 || st[0].Up || !strings.Contains(st[0].Error, "exited") {
		t.Errorf("servers while down: %+v", st)
	}

	close(release)
	waitTools(t, cs, "up__t", true)
	if text, isErr := call(t, cs, "up__t", `{}`); isErr || text != "done" {
		t.Errorf("up__t after the restart: %v %q", isErr, text)
	}
	if sv.dialed() != 2 {
		t.Errorf("dialed %d times, want 2", sv.dialed())
	}
	for deadline := time.Now().Add(10 * time.Second); !g.Servers()[0].Up; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("servers after the restart: %+v", g.Servers())
			break
		}
	}
}

// A call in flight when its server dies gets an error, not a hang.
func TestCallInFlightWhenTheServerDies(t *testing.T) {
	sv := newServer()
	r, waits, _ := stepWaits()
	g := superviseGateway(t, map[string]*server{"up": sv}, r)
	cs := (&fixture{g: g}).connect(t)
	type result struct {
		text  string
		isErr bool
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up__slow", Arguments: map[string]any{}})
		if err != nil {
			done <- result{err.Error(), true}
			return
		}
		done <- result{res.Content[0].(*mcp.TextContent).Text, res.IsError}
	}()
	<-sv.entered
	sv.crash()
	select {
	case r := <-done:
		if !r.isErr || !strings.Contains(r.text, "server up went down during the call") {
			t.Errorf("the call in flight: %v %q", r.isErr, r.text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight hangs")
	}
	// Its tools are withdrawn by the time the agent knows, whether or not
	// the supervisor has seen the server go.
	if got := toolNames(t, cs); len(got) != 0 {
		t.Errorf("tools after the failed call = %v", got)
	}
	<-waits
}

// A server that cannot start does not stop the gateway or the other
// servers; it is retried with waits that double up to the bound, and
// after the limit of restarts it stays down, and says so.
func TestServerThatCannotStart(t *testing.T) {
	good, bad := newServer(), newServer()
	bad.fail = errors.New("no such command")
	var mu sync.Mutex
	var waits []time.Duration
	stopped := make(chan struct{})
	now := time.Unix(1e9, 0)
	r := gateway.Restart{
		Wait: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			return nil
		},
		Now: func() time.Time { return now },
	}
	g := superviseGateway(t, map[string]*server{"good": good, "bad": bad}, r)
	cs := (&fixture{g: g}).connect(t)
	if text, isErr := call(t, cs, "good__t", `{}`); isErr || text != "done" {
		t.Errorf("the good server's tool: %v %q", isErr, text)
	}
	go func() {
		for {
			for _, st := range g.Servers() {
				if st.Name == "bad" && strings.Contains(st.Why, "no longer restarts") {
					close(stopped)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatalf("the bad server is still restarted: %+v", g.Servers())
	}
	mu.Lock()
	got := fmt.Sprint(waits)
	mu.Unlock()
	if want := "[500ms 1s 2s 4s 8s 16s 30s 30s 30s 30s]"; got != want {
		t.Errorf("waits %s, want %s", got, want)
	}
	if bad.dialed() != 11 {
		t.Errorf("the bad server was started %d times, want 11 (the first and 10 restarts)", bad.dialed())
	}
	text, isErr := call(t, cs, "bad__t", `{}`)
	if !isErr || !strings.Contains(text, "rule servers.bad") || !strings.Contains(text, "went down 11 times within 10m0s, and cordon no longer restarts it") {
		t.Errorf("the bad server's tool: %v %q", isErr, text)
	}
	if text, isErr := call(t, cs, "good__t", `{}`); isErr || text != "done" {
		t.Errorf("the good server's tool, later: %v %q", isErr, text)
	}
}

// The limit counts restarts within the window: a server that goes down
// now and then is restarted every time.
func TestRestartsOutsideTheWindowAreNotCounted(t *testing.T) {
	bad := newServer()
	bad.fail = errors.New("no such command")
	var mu sync.Mutex
	n := 0
	enough := make(chan struct{})
	r := gateway.Restart{
		Limit: 2,
		Wait: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			if n++; n == 20 {
				close(enough)
			}
			if n >= 20 {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
		// An hour passes at every look at the clock.
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			n := n
			return time.Unix(1e9, 0).Add(time.Duration(n) * time.Hour)
		},
	}
	g := superviseGateway(t, map[string]*server{"bad": bad}, r)
	select {
	case <-enough:
	case <-time.After(20 * time.Second):
		t.Fatalf("the server was not restarted 20 times: %+v", g.Servers())
	}
	if st := g.Servers(); strings.Contains(st[0].Why, "no longer") {
		t.Errorf("stopped though its restarts were hours apart: %+v", st)
	}
}

// The gateway proxies neither resources nor prompts: it does not
// advertise them, and a request for them is an error that says why.
func TestResourcesAndPromptsAreRefused(t *testing.T) {
	g := superviseGateway(t, map[string]*server{"up": newServer()}, gateway.Restart{})
	cs := (&fixture{g: g}).connect(t)
	caps := cs.InitializeResult().Capabilities
	if caps.Resources != nil || caps.Prompts != nil || caps.Completions != nil || caps.Tools == nil {
		t.Errorf("capabilities: %+v", caps)
	}
	_, err := cs.ListResources(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "cordon does not proxy resources/list") {
		t.Errorf("resources/list: %v", err)
	}
	_, err = cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "p"})
	if err == nil || !strings.Contains(err.Error(), "cordon does not proxy prompts/get") {
		t.Errorf("prompts/get: %v", err)
	}
	if text, isErr := call(t, cs, "up__t", `{}`); isErr || text != "done" {
		t.Errorf("tools still work: %v %q", isErr, text)
	}
}

// A remote server whose connection breaks is reached again once it is
// back, and its tools with it.
func TestRemoteServerReconnects(t *testing.T) {
	sv := newServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sv.s }, nil)
	serve := func(addr string) (*http.Server, string) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		return srv, ln.Addr().String()
	}
	srv, addr := serve("127.0.0.1:0")
	sv.remote = func() (mcp.Transport, error) {
		return &mcp.StreamableClientTransport{Endpoint: "http://" + addr, MaxRetries: -1}, nil
	}
	r, waits, release := stepWaits()
	g := superviseGateway(t, map[string]*server{"up": sv}, r)
	cs := (&fixture{g: g}).connect(t)
	if text, isErr := call(t, cs, "up__t", `{}`); isErr || text != "done" {
		t.Fatalf("up__t: %v %q", isErr, text)
	}
	srv.Close()
	<-waits
	if text, isErr := call(t, cs, "up__t", `{}`); !isErr || !strings.Contains(text, "unavailable: server up is down (restarting)") {
		t.Errorf("while it is away: %v %q", isErr, text)
	}
	again, _ := serve(addr)
	defer again.Close()
	close(release)
	waitTools(t, cs, "up__t", true)
	if text, isErr := call(t, cs, "up__t", `{}`); isErr || text != "done" {
		t.Errorf("up__t when it is back: %v %q", isErr, text)
	}
}

// The wait doubles while a server keeps going down, and starts again from
// the first once it stayed up longer than the longest wait.
func TestBackoffStartsAgainAfterAWhileUp(t *testing.T) {
	sv := newServer()
	r, waits, release := stepWaits()
	var mu sync.Mutex
	clock := time.Unix(1e9, 0)
	r.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	g := superviseGateway(t, map[string]*server{"up": sv}, r)
	cs := (&fixture{g: g}).connect(t)
	var got []time.Duration
	for _, upFor := range []time.Duration{0, time.Second, 31 * time.Second} {
		waitTools(t, cs, "up__t", true)
		mu.Lock()
		clock = clock.Add(upFor)
		mu.Unlock()
		sv.crash()
		got = append(got, <-waits)
		release <- struct{}{}
	}
	if fmt.Sprint(got) != "[500ms 1s 500ms]" {
		t.Errorf("waits %v, want [500ms 1s 500ms]", got)
	}
}
