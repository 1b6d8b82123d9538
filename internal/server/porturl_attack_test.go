package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// a port URL's requests are charged to the anonymous per-remote
// bucket, not to the token the URL acts for: a token out of its rate
// still reaches the port, through the URL, as itself.
func TestAttack_PortURLSkipsTokenRateLimit(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			return &portBox{fakeBox: &fakeBox{id: id, done: make(chan struct{})}, addr: h.ln.Addr().String()}, nil
		}
		for _, tk := range o.Config.Tokens {
			if tk.Name == "alice-a" {
				tk.RateLimit = &Rate{Rate: 0.001, Burst: 3}
			}
		}
	})
	ts := httptest.NewServer(f.srv.Handler())
	t.Cleanup(ts.Close)
	sb, err := f.client("alice-a").Create(context.Background(), "") // 1
	if err != nil {
		t.Fatal(err)
	}
	status, u := issue(t, ts.URL, sb.ID, f.tokens["alice-a"], api.PortURLRequest{Port: 8000}) // 2
	if status != 200 {
		t.Fatalf("issue: %d", status)
	}
	get := func(path, tok string) int {
		r, _ := http.NewRequest("GET", ts.URL+path, nil)
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	get("/v1/sandboxes/"+sb.ID, f.tokens["alice-a"]) // 3: the token's last
	if s := get("/v1/sandboxes/"+sb.ID+"/ports/8000/x", f.tokens["alice-a"]); s != 429 {
		t.Fatalf("the token's own route: %d, want 429", s)
	}
	ok := 0
	for i := 0; i < 30; i++ {
		if get(u.Path+"x", "") == 200 {
			ok++
		}
	}
	if ok > 0 {
		t.Errorf("%d requests acting as token alice-a passed while the token is out of its rate", ok)
	}
}

// a request through a port URL answered >= 400 (a 404 of the
// sandbox's own app, say) is recorded as an anonymous api_request whose
// path is the whole capability.
func TestAttack_PortURLCapabilityInAuditLog(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
	f, base, id := portURLFixture(t, h)
	_, u := issue(t, base, id, f.tokens["alice-a"], api.PortURLRequest{Port: 8000, ExpiresIn: "1h"})
	capability := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/v1/p/"), "/")
	resp, _ := open(t, base+u.Path+"favicon.ico")
	if resp.StatusCode != 404 {
		t.Fatalf("%d", resp.StatusCode)
	}
	f.srv.opts.Audit.Flush()
	b, _ := os.ReadFile(f.log)
	if strings.Contains(string(b), capability) {
		for _, r := range f.records(t, "api_request") {
			if p, _ := r["path"].(string); strings.Contains(p, capability) {
				t.Errorf("the audit log holds the live capability: api_request %v", r)
			}
		}
	}
}

// the browser's Referer (or any header the sandbox's page makes
// the browser send) reaches the sandbox's server unchanged: a page that
// sets <meta name="referrer" content="unsafe-url"> (which overrides the
// Referrer-Policy header) gets its capability in every subresource
// request. (Its script can read it from location anyway.)
func TestAttack_PortURLRefererForwarded(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f, base, id := portURLFixture(t, h)
	_, u := issue(t, base, id, f.tokens["alice-a"], api.PortURLRequest{Port: 8000})
	capability := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/v1/p/"), "/")
	r, _ := http.NewRequest("GET", base+u.Path+"img.png", nil)
	r.Header.Set("Referer", base+u.Path+"index.html")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.mu.Lock()
	head := h.heads[len(h.heads)-1]
	h.mu.Unlock()
	if strings.Contains(head, capability) {
		t.Errorf("the sandbox's server saw the capability:\n%s", head)
	}
}

// a port URL's expiry is checked when a request starts only: a
// WebSocket (or any long answer) opened through it lasts past the expiry.
func TestAttack_PortURLWebSocketOutlivesExpiry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				io.Copy(c, br) // echo
			}(c)
		}
	}()
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			return &portBox{fakeBox: &fakeBox{id: id, done: make(chan struct{})}, addr: ln.Addr().String()}, nil
		}
	})
	ts := httptest.NewServer(f.srv.Handler())
	t.Cleanup(ts.Close)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	_, u := issue(t, ts.URL, sb.ID, f.tokens["alice-a"], api.PortURLRequest{Port: 8000, ExpiresIn: "1s"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET "+u.Path+"ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	status, _ := br.ReadString('\n')
	if !strings.Contains(status, "101") {
		t.Fatalf("upgrade: %q", status)
	}
	for {
		line, _ := br.ReadString('\n')
		if line == "\r\n" || line == "" {
			break
		}
	}
	// The URL expires; the agent keeps its sandbox busy (a command
	// every few seconds would; here, the clock stays inside idle).
	f.advance(30 * time.Second)
	time.Sleep(1500 * time.Millisecond) // a janitor round, and past the real second
	if resp, _ := open(t, ts.URL+u.Path); resp.StatusCode != 401 {
		t.Fatalf("a new request after the expiry: %d", resp.StatusCode)
	}
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(conn, "still-here\n")
	got, err := br.ReadString('\n')
	if err == nil && got == "still-here\n" {
		t.Errorf("30s after its 1s port URL expired, the WebSocket it opened still carries traffic both ways")
	}
}

// headers the sandbox's server sends that act on the whole origin
// (the server's own, where the admin web page runs) reach the browser.
func TestAttack_PortURLOriginWideHeaders(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nClear-Site-Data: \"storage\", \"executionContexts\"\r\nStrict-Transport-Security: max-age=63072000; includeSubDomains\r\nContent-Length: 2\r\n\r\nok")
	f, base, id := portURLFixture(t, h)
	_, u := issue(t, base, id, f.tokens["alice-a"], api.PortURLRequest{Port: 8000})
	resp, _ := open(t, base+u.Path)
	for _, k := range []string{"Clear-Site-Data", "Strict-Transport-Security"} {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("the sandbox's %s: %s reaches the browser, on the server's origin", k, v)
		}
	}
}

// A request through a port URL is no use of the sandbox: whoever holds
// the URL (the sandbox's own page, even, which reads it from location)
// cannot keep the sandbox from its idle timeout.
func TestAttack_PortURLKeepsSandboxFromIdle(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f, base, id := portURLFixture(t, h)
	_, u := issue(t, base, id, f.tokens["alice-a"], api.PortURLRequest{Port: 8000, ExpiresIn: "1h"})
	for i := 0; i < 5; i++ { // 5 x 50s, idle is 1m
		f.advance(50 * time.Second)
		open(t, base+u.Path)
	}
	time.Sleep(600 * time.Millisecond)
	sb, err := f.client("alice-a").Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sb.State == "running" {
		waitFor(t, "the sandbox to end at its idle timeout", func() bool {
			sb, _ := f.client("alice-a").Get(context.Background(), id)
			return sb.Ended == "idle_timeout"
		})
	}
}
