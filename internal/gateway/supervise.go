package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// Restart says how the gateway keeps its upstream servers up. A server
// that exits, whose connection breaks, or that cannot be started is
// restarted after a wait that doubles from First up to Max; one that went
// down Limit times within Window stays down, and its tools are refused
// saying so. Zero fields take the defaults.
type Restart struct {
	First  time.Duration // 500ms
	Max    time.Duration // 30s; a server that stayed up this long starts again from First
	Limit  int           // 10
	Window time.Duration // 10m
	// Start bounds connecting to a server and listing its tools (30s).
	Start time.Duration
	// KeepAlive, when set, pings each server this often, and closes (and
	// so restarts) a connection that misses three pings in a row.
	KeepAlive time.Duration
	// Once connects to each server once and restarts none: for listing.
	Once bool
	// Wait waits d or until ctx ends, when it returns ctx's error; Now is
	// the time. Tests replace them.
	Wait func(ctx context.Context, d time.Duration) error
	Now  func() time.Time
}

func (r Restart) withDefaults() Restart {
	if r.First <= 0 {
		r.First = 500 * time.Millisecond
	}
	if r.Max < r.First {
		r.Max = max(30*time.Second, r.First)
	}
	if r.Limit <= 0 {
		r.Limit = 10
	}
	if r.Window <= 0 {
		r.Window = 10 * time.Minute
	}
	if r.Start <= 0 {
		r.Start = 30 * time.Second
	}
	if r.Wait == nil {
		r.Wait = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// link is the gateway's state of one upstream server.
type link struct {
	// down is why the server is down, as its tools' refusals say; "" when
	// it is up.
	down string
	// err is what went wrong last, for the operator.
	err string
	// stopped says it is no longer restarted.
	stopped bool
}

// supervisor runs one goroutine per upstream server.
type supervisor struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ServerStatus is an upstream server as the gateway sees it.
type ServerStatus struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	// Why says why it is down.
	Why string `json:"why,omitempty"`
	// Error is what went wrong when it was last started or went down.
	Error string `json:"error,omitempty"`
}

// Servers lists the upstream servers, up or down, by name.
func (g *Gateway) Servers() []ServerStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []ServerStatus
	for _, name := range slices.Sorted(maps.Keys(g.links)) {
		l := g.links[name]
		out = append(out, ServerStatus{Name: name, Up: l.down == "", Why: l.down, Error: l.err})
	}
	return out
}

// startUpstreams starts a supervisor for each upstream server and returns
// once each has been tried a first time: a server that could not be
// started does not stop the gateway or the others; it is retried.
func (g *Gateway) startUpstreams(ctx context.Context) {
	names := map[string]bool{}
	for name := range g.cfg.Upstreams {
		names[name] = true
	}
	for name := range g.cfg.Dial {
		names[name] = true
	}
	if len(names) == 0 {
		return
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.sup = &supervisor{cancel: cancel}
	g.mu.Lock()
	g.links = map[string]*link{}
	for name := range names {
		g.links[name] = &link{down: fmt.Sprintf("unavailable: server %s is starting", name)}
	}
	g.mu.Unlock()
	var tried sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(names)) {
		tried.Add(1)
		g.sup.wg.Add(1)
		go func() {
			defer g.sup.wg.Done()
			g.supervise(sctx, name, tried.Done)
		}()
	}
	// The first try ends when the caller gives up too.
	done := make(chan struct{})
	go func() { tried.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// stopUpstreams ends the supervisors and the connections to the servers.
func (g *Gateway) stopUpstreams() {
	if g.sup == nil {
		return
	}
	g.sup.cancel()
	g.mu.Lock()
	ups := slices.Collect(maps.Values(g.upstreams))
	g.mu.Unlock()
	for _, cs := range ups {
		cs.Close()
	}
	g.sup.wg.Wait()
}

// supervise keeps the server name up until ctx ends; tried is called once
// its first try is over.
func (g *Gateway) supervise(ctx context.Context, name string, tried func()) {
	r := g.cfg.Restart.withDefaults()
	wait := r.First
	var restarts []time.Time
	for first := true; ; first = false {
		// Up since it was started: time spent starting counts too.
		since := r.Now()
		cs, err := g.connect(ctx, r, name, first)
		if first {
			tried()
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			cs.Wait()
			if ctx.Err() != nil {
				return
			}
			err = errors.New("it exited, or its connection broke")
			if r.Now().Sub(since) >= r.Max {
				wait = r.First
			}
		}
		now := r.Now()
		restarts = slices.DeleteFunc(restarts, func(t time.Time) bool { return now.Sub(t) >= r.Window })
		switch {
		case r.Once:
			g.down(name, nil, err, fmt.Sprintf("unavailable: server %s is down (%v)", name, err), true)
			return
		case g.cfg.Dial[name] == nil:
			g.down(name, nil, err, fmt.Sprintf("unavailable: server %s is down, and cordon cannot restart it", name), true)
			g.cfg.Logf("server %s: %v; it cannot be restarted", name, err)
			return
		case len(restarts) >= r.Limit:
			g.down(name, nil, err, fmt.Sprintf("unavailable: server %s is down: it went down %d times within %s, and cordon no longer restarts it", name, len(restarts)+1, r.Window), true)
			g.cfg.Logf("server %s: %v; it went down %d times within %s: cordon no longer restarts it", name, err, len(restarts)+1, r.Window)
			return
		}
		g.down(name, nil, err, fmt.Sprintf("unavailable: server %s is down (restarting)", name), false)
		g.cfg.Logf("server %s: %v; restarting it in %s", name, err, wait)
		if r.Wait(ctx, wait) != nil {
			return
		}
		restarts = append(restarts, r.Now())
		wait = min(2*wait, r.Max)
	}
}

// connect starts the server name (first: for the first time), connects to
// it and offers its tools.
func (g *Gateway) connect(ctx context.Context, r Restart, name string, first bool) (*mcp.ClientSession, error) {
	var tr mcp.Transport
	switch {
	case first && g.cfg.Upstreams[name] != nil:
		tr = g.cfg.Upstreams[name]
	case g.cfg.Dial[name] != nil:
		var err error
		if tr, err = g.cfg.Dial[name](); err != nil {
			return nil, fmt.Errorf("starting it: %w", err)
		}
	default:
		return nil, errors.New("it cannot be restarted")
	}
	cctx, cancel := context.WithTimeout(ctx, r.Start)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "cordon", Version: g.cfg.Version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			if err := g.refresh(ctx, name); err != nil {
				g.cfg.Logf("server %s: listing its tools again: %v", name, err)
			}
		},
		KeepAlive:                 r.KeepAlive,
		KeepAliveFailureThreshold: 3,
	})
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if ctx.Err() != nil {
		g.mu.Unlock()
		cs.Close()
		return nil, ctx.Err()
	}
	g.upstreams[name] = cs
	g.mu.Unlock()
	if !first {
		g.cfg.Logf("server %s is up again", name)
	}
	if err := g.refresh(cctx, name); err != nil {
		cs.Close()
		return nil, fmt.Errorf("listing its tools: %w", err)
	}
	// Up once its tools are known: until then, its declared tools are
	// refused as the server's.
	g.mu.Lock()
	if g.upstreams[name] == cs {
		l := g.links[name]
		l.down, l.err = "", ""
		g.withdraw()
	}
	g.mu.Unlock()
	return cs, nil
}

// down withdraws the tools of the server name, which went down for err;
// its declared tools are refused with why. With only, it does so only
// while only is the server's connection.
func (g *Gateway) down(name string, only *mcp.ClientSession, err error, why string, stopped bool) {
	g.mu.Lock()
	cs := g.upstreams[name]
	if only != nil && cs != only {
		g.mu.Unlock()
		return
	}
	delete(g.upstreams, name)
	l := g.links[name]
	l.down, l.err, l.stopped = why, err.Error(), stopped
	var remove []string
	for n, t := range g.tools {
		if t.server == name {
			delete(g.tools, n)
			if t.withdraw == "" {
				remove = append(remove, n)
			}
		}
	}
	g.withdraw()
	if len(remove) > 0 {
		g.server.RemoveTools(remove...)
	}
	g.mu.Unlock()
	if cs != nil {
		cs.Close()
	}
}

// unoffered is why a tool of the profile that nothing offers is refused:
// its server is down, or it has none. g.mu is held.
func (g *Gateway) unoffered(name string) toolpolicy.Withdrawn {
	if srv, _, ok := g.cfg.Profile.Upstream(name); ok {
		if l := g.links[srv]; l != nil && l.down != "" {
			return toolpolicy.Withdrawn{Rule: "servers." + srv, Reason: l.down}
		}
	}
	return toolpolicy.Withdrawn{Rule: "tools." + name, Reason: fmt.Sprintf("%s is in the profile, but it is not a built-in tool and no server offers it", name)}
}

// upstreamOf is the tool name and the connection to its server, or the
// refusal of a call when the server is down.
func (g *Gateway) upstreamOf(name string) (*tool, *mcp.ClientSession, *mcp.CallToolResult) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tools[name]
	if t != nil && t.withdraw != "" {
		return nil, nil, refusal(toolpolicy.Decision{Rule: t.rule, Reason: t.withdraw})
	}
	var cs *mcp.ClientSession
	if t != nil {
		cs = g.upstreams[t.server]
	}
	if cs == nil {
		w := g.unoffered(name)
		return nil, nil, refusal(toolpolicy.Decision{Rule: w.Rule, Reason: w.Reason})
	}
	return t, cs, nil
}

// upstreamResult is what a call made on the server of t returns: an error
// of the connection (the server went down during the call) is a tool error
// that says so.
func (g *Gateway) upstreamResult(ctx context.Context, t *tool, cs *mcp.ClientSession, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if err == nil || ctx.Err() != nil || !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, io.EOF) {
		return res, err
	}
	// Withdrawn now, not when the supervisor sees it: the agent's next
	// look at its tools must not find them.
	g.down(t.server, cs, err, fmt.Sprintf("unavailable: server %s is down (restarting)", t.server), false)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("unavailable: server %s went down during the call (%v); whether the call took effect is unknown", t.server, err),
	}}}, nil
}
