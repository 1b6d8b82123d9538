package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingResolver answers from a table and records every name it is
// asked for.
type recordingResolver struct {
	mu    sync.Mutex
	asked []string
	addrs map[string]netip.Addr
}

func (r *recordingResolver) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if a, ok := r.addrs[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *recordingResolver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// connectStatus sends CONNECT target through the proxy at proxy and returns
// the status of the answer, and its body.
func connectStatus(t *testing.T, proxy, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		return 200, ""
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// socksName sends a SOCKS5 CONNECT to host (a name) and port through the
// proxy at proxy, and returns the reply code.
func socksName(t *testing.T, proxy, host string, port uint16) byte {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{5, 1, 0})
	var r [2]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		t.Fatal(err)
	}
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...)
	req = append(req, byte(port>>8), byte(port))
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatal(err)
	}
	return rep[1]
}

// A name no allow rule names, on the port asked, or that a deny rule
// refuses, is refused before any lookup: it never reaches the resolver,
// whichever way it was asked for.
func TestDeniedNamesAreNotLookedUp(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	_, port, _ := net.SplitHostPort(target)
	res := &recordingResolver{addrs: map[string]netip.Addr{
		"allowed.test":         netip.MustParseAddr("127.0.0.1"),
		"blocked.allowed.test": netip.MustParseAddr("127.0.0.1"),
	}}
	p := &Proxy{Policy: mustPolicy(t, []string{"allowed.test:" + port, "*.allowed.test:" + port}, []string{"blocked.allowed.test"}), Resolve: res.resolve}
	proxy := startProxy(t, p)

	for _, dest := range []string{
		"secret1.attacker.example:443",
		"SECRET2.attacker.example:" + port,
		"allowed.test:443", // named, but not on this port
		"blocked.allowed.test:" + port,
	} {
		if status, body := connectStatus(t, proxy, dest); status != 403 {
			t.Errorf("CONNECT %s: %d %q", dest, status, body)
		}
	}
	resp, err := client(proxy).Get("http://secret3.attacker.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("forwarded request: %d", resp.StatusCode)
	}
	if code := socksName(t, proxy, "secret4.attacker.example", 443); code != socksNotAllowed {
		t.Errorf("SOCKS5: reply %d", code)
	}
	if code := socksName(t, proxy, "secret5\x1b.allowed.test", 443); code != socksNotAllowed {
		t.Errorf("SOCKS5, a name that is not one: reply %d", code)
	}
	if asked := res.names(); len(asked) != 0 {
		t.Fatalf("the resolver was asked for %q", asked)
	}
	// The name a rule allows is looked up, once per connection.
	if status, body := connectStatus(t, proxy, "allowed.test:"+port); status != 200 {
		t.Fatalf("CONNECT to the allowed name: %d %q", status, body)
	}
	if asked := res.names(); !slices.Equal(asked, []string{"allowed.test"}) {
		t.Errorf("the resolver was asked for %q", asked)
	}
}

// A name a rule allows that does not resolve is no denial: the client gets
// a gateway error, the event says "unresolved", and the budget of denials is
// untouched.
func TestUnresolvedIsNotADenial(t *testing.T) {
	res := &recordingResolver{}
	var denials []string
	p := &Proxy{Policy: mustPolicy(t, []string{"gone.test"}, nil), Resolve: res.resolve,
		Budget: Budget{Denied: 1}, OnDeny: func(r string) { denials = append(denials, r) }}
	proxy := startProxy(t, p)

	if status, body := connectStatus(t, proxy, "gone.test:443"); status != 502 || !strings.Contains(body, "the lookup of the name failed") {
		t.Errorf("CONNECT: %d %q", status, body)
	}
	// A client that shows only the status line of a refused CONNECT
	// (Go's, Python's) shows why.
	if _, err := client(proxy).Get("https://gone.test/"); err == nil || !strings.Contains(err.Error(), "Bad Gateway (cordon: gone.test:443: the lookup of the name failed") {
		t.Errorf("CONNECT through Go's client: %v", err)
	}
	resp, err := client(proxy).Get("http://gone.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 || resp.Header.Get("X-Cordon-Denied") != "" {
		t.Errorf("forwarded request: %d %q", resp.StatusCode, resp.Header.Get("X-Cordon-Denied"))
	}
	if code := socksName(t, proxy, "gone.test", 443); code != socksHostUnreach {
		t.Errorf("SOCKS5: reply %d, want %d", code, socksHostUnreach)
	}
	ev := p.Events()
	if len(ev) != 4 {
		t.Fatalf("events %+v", ev)
	}
	for _, e := range ev {
		if e.Decision != Unresolved || !strings.Contains(e.Reason, "gone.test:") || !strings.Contains(e.Reason, "lookup") {
			t.Errorf("event %+v", e)
		}
	}
	if len(denials) != 0 || p.Exhausted() != "" {
		t.Errorf("denials %q, exhausted %q", denials, p.Exhausted())
	}
}

// Refused attempts are budgeted: past Budget.Denied of them, whatever
// refused them (a rule, a TLS server name), the budget is used up and every
// further connection is refused.
func TestDeniedBudget(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	_, port, _ := net.SplitHostPort(target)
	var ended atomic.Int32
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port}, nil), Budget: Budget{Denied: 3},
		OnDenialsUsedUp: func() { ended.Add(1) }}
	proxy := startProxy(t, p)
	for i := range 3 {
		if status, _ := connectStatus(t, proxy, fmt.Sprintf("10.9.9.%d:80", i)); status != 403 {
			t.Fatalf("attempt %d: %d", i, status)
		}
	}
	if got := p.Exhausted(); got != "" {
		t.Fatalf("exhausted %q after 3 of 3 denials", got)
	}
	// The fourth: a tunnel cut for a foreign server name.
	c, br := openTunnel(t, proxy, "local.test:"+port)
	c.Write(clientHello(t, "evil.example"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, br)
	deadline := time.Now().Add(5 * time.Second)
	for p.Exhausted() != "max_denied" {
		if time.Now().After(deadline) {
			t.Fatalf("exhausted %q; events %+v", p.Exhausted(), p.Events())
		}
		time.Sleep(10 * time.Millisecond)
	}
	status, body := connectStatus(t, proxy, "local.test:"+port)
	if status != 403 || !strings.Contains(body, "the egress budget is used up (max_denied)") {
		t.Errorf("after the budget: %d %q", status, body)
	}
	// cordon is told once, to end the run.
	if n := ended.Load(); n != 1 {
		t.Errorf("OnDenialsUsedUp called %d times", n)
	}
}

// Names the sandbox chooses reach reasons and events escaped and bounded:
// a SOCKS5 host name full of terminal escapes, or a TLS server name with
// some, shows as text.
func TestHostileNamesAreEscaped(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	_, port, _ := net.SplitHostPort(target)
	var mu sync.Mutex
	var reasons []string
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port}, nil), OnDeny: func(r string) {
		mu.Lock()
		reasons = append(reasons, r)
		mu.Unlock()
	}}
	proxy := startProxy(t, p)
	socksName(t, proxy, "\x1b[2J\x1b]0;owned\x07evil\nname.example", 443)
	socksName(t, proxy, strings.Repeat("\x1b", 255), 443)
	// A server name of the same length as "example.org", so that the
	// ClientHello's lengths still hold.
	hello := clientHello(t, "example.org")
	i := strings.Index(string(hello), "example.org")
	copy(hello[i:], "ex\x1bmple\norg")
	c, br := openTunnel(t, proxy, "local.test:"+port)
	c.Write(hello)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, br)

	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(reasons)
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("denials %q", reasons)
		}
		time.Sleep(10 * time.Millisecond)
	}
	texts := slices.Clone(reasons)
	for _, e := range p.Events() {
		texts = append(texts, e.Host, e.Reason)
		if len(e.Host) > maxShownName {
			t.Errorf("a host of %d bytes in %+v", len(e.Host), e)
		}
	}
	for _, s := range texts {
		if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Errorf("a control character in %q", s)
		}
	}
	if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, `\x1b[2J\x1b]0;owned\x07evil\x0aname.example`) }) ||
		!slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, `the TLS server name "ex\x1bmple\x0aorg" differs`) }) {
		t.Errorf("reasons %q", reasons)
	}
}

// The proxy keeps at most MaxEvents attempts, whatever the sandbox does;
// later ones are still decided and counted.
func TestEventsBounded(t *testing.T) {
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:80"}, nil)}
	for i := range MaxEvents + 10 {
		p.decide("connect", fmt.Sprintf("10.1.%d.%d", i/250, i%250), 80, "")
	}
	if got := len(p.Events()); got != MaxEvents {
		t.Fatalf("%d events kept", got)
	}
	if got := p.Unlisted(); got != 10 {
		t.Fatalf("%d unlisted", got)
	}
}

// The reason that ends a refusal's status line holds the sandbox's own
// words (the host it named): nothing of it can end the line or the head,
// or act on a terminal, and it is bounded.
func TestStatusWhy(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"cordon: gone.test:443: the lookup failed\n", "cordon: gone.test:443: the lookup failed"},
		{"first\r\nX-Injected: yes\r\n\r\nHTTP/1.1 200 OK\n", "first"},
		{"a\rb\x00c\x1b[2Jd\u0085e\u2028f", "a?b?c?[2Jd??e???f"},
		{"", ""},
	} {
		if got := statusWhy(tc.body); got != tc.want {
			t.Errorf("statusWhy(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
	long := statusWhy(strings.Repeat("é", 300))
	if len(long) != 200 || !strings.HasSuffix(long, "...") || strings.ContainsAny(long, "\r\n") {
		t.Errorf("a long reason: %d bytes, %q", len(long), long[len(long)-10:])
	}
}
