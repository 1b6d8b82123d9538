package egress

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// A name's decision is kept for the proxy's life, but what the name
// resolves to is not: each connection looks it up again and checks every
// address it gets, so a name that led to an allowed address once cannot
// lead to a forbidden one later.
func TestCachedNameDecisionChecksEachAddress(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	_, port, _ := net.SplitHostPort(target)
	portNum, _ := strconv.Atoi(port)
	res := &recordingResolver{addrs: map[string]netip.Addr{"flip.test": netip.MustParseAddr("127.0.0.1")}}
	resolveTo := func(a string) {
		res.mu.Lock()
		res.addrs["flip.test"] = netip.MustParseAddr(a)
		res.mu.Unlock()
	}
	p := &Proxy{Policy: mustPolicy(t, []string{"flip.test:" + port}, []string{"10.0.0.0/8", "169.254.0.0/16"}), Resolve: res.resolve}
	proxy := startProxy(t, p)

	if status, body := connectStatus(t, proxy, "flip.test:"+port); status != 200 {
		t.Fatalf("CONNECT to the allowed name: %d %q", status, body)
	}
	lookups := 1
	for _, forbidden := range []string{"10.0.0.5", "169.254.169.254"} {
		resolveTo(forbidden)
		if status, body := connectStatus(t, proxy, "flip.test:"+port); status != 403 || !strings.Contains(body, "is denied by the rule") {
			t.Errorf("CONNECT once the name resolves to %s: %d %q", forbidden, status, body)
		}
		if code := socksName(t, proxy, "flip.test", uint16(portNum)); code != socksNotAllowed {
			t.Errorf("SOCKS5 once the name resolves to %s: reply %d", forbidden, code)
		}
		lookups += 2
		if ev := p.Events(); ev[len(ev)-1].Decision != Deny || ev[len(ev)-1].Addr != forbidden {
			t.Errorf("last event %+v, want a denial of %s", ev[len(ev)-1], forbidden)
		}
	}
	resolveTo("127.0.0.1")
	if status, body := connectStatus(t, proxy, "flip.test:"+port); status != 200 {
		t.Fatalf("CONNECT once the name resolves to an allowed address again: %d %q", status, body)
	}
	lookups++
	// A port the rule does not name is decided on its own, and the name
	// is not looked up for it.
	if status, body := connectStatus(t, proxy, "flip.test:1"); status != 403 {
		t.Errorf("CONNECT to a port no rule names: %d %q", status, body)
	}
	if asked := res.names(); len(asked) != lookups {
		t.Errorf("the resolver was asked %d times (%q), want %d: once per allowed connection attempt", len(asked), asked, lookups)
	}
}

// The decisions kept are bounded: names past the bound are decided afresh,
// the same way.
func TestNameDecisionsBounded(t *testing.T) {
	p := &Proxy{Policy: mustPolicy(t, []string{"*.allowed.test"}, nil)}
	for i := range maxNames + 10 {
		host := "h" + strconv.Itoa(i) + ".allowed.test"
		if valid, d := p.checkName(host, 443, ""); !valid || !d.Allow {
			t.Fatalf("%s: valid %v, %+v", host, valid, d)
		}
		if valid, d := p.checkName(host, 25, ""); !valid || d.Allow {
			t.Fatalf("%s port 25: valid %v, %+v", host, valid, d)
		}
	}
	if valid, _ := p.checkName("bad\x00name", 443, ""); valid {
		t.Error("an invalid name passed")
	}
	if len(p.names) != maxNames {
		t.Errorf("%d decisions kept, bound %d", len(p.names), maxNames)
	}
}
