package egress

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDNSAnswersAllowedNamesOnly(t *testing.T) {
	p := &Proxy{Policy: mustPolicy(t, []string{"api.github.com", "*.pypi.org:443"}, []string{"evil.pypi.org"})}
	answer := func(name string, typ dnsmessage.Type) dnsmessage.Message {
		var m dnsmessage.Message
		if err := m.Unpack(p.answerDNS(query(t, name, typ))); err != nil {
			t.Fatal(err)
		}
		if m.ID != 7 || !m.Response {
			t.Fatalf("header %+v", m.Header)
		}
		return m
	}
	m := answer("api.github.com.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
		t.Fatalf("allowed name: %+v", m)
	}
	a := netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A)
	if !FakeNet.Contains(a) {
		t.Errorf("answer %s outside %s", a, FakeNet)
	}
	if name, ok := p.nameOf(a); !ok || name != "api.github.com" {
		t.Errorf("fake %s stands for %q", a, name)
	}
	// The same name keeps its address; another gets another.
	if again := answer("API.GitHub.com.", dnsmessage.TypeA); netip.AddrFrom4(again.Answers[0].Body.(*dnsmessage.AResource).A) != a {
		t.Error("the same name got a new address")
	}
	if b := answer("files.pypi.org.", dnsmessage.TypeA); netip.AddrFrom4(b.Answers[0].Body.(*dnsmessage.AResource).A) == a {
		t.Error("two names share an address")
	}
	if m := answer("api.github.com.", dnsmessage.TypeAAAA); m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Errorf("AAAA: %+v", m)
	}
	for _, name := range []string{"example.org.", "evil.pypi.org.", "pypi.org."} {
		if m := answer(name, dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if p.answerDNS([]byte("garbage")) != nil {
		t.Error("answered garbage")
	}
}

// A connection the redirect hands over is decided by its fake address's
// name and checked as a tunnel is: a ClientHello for another name, over two
// records, is cut; a name that does not resolve is reset, not denied.
func TestServeTransparent(t *testing.T) {
	target, got := recorder(t)
	port := portOf(t, "http://"+target)
	res := &recordingResolver{addrs: map[string]netip.Addr{"local.test": netip.MustParseAddr("127.0.0.1")}}
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port, "gone.test:" + port}, nil), Resolve: res.resolve}
	startProxy(t, p) // for its loopback-only dialer
	fakeOf := func(name string) netip.Addr {
		var m dnsmessage.Message
		if err := m.Unpack(p.answerDNS(query(t, name+".", dnsmessage.TypeA))); err != nil || len(m.Answers) != 1 {
			t.Fatalf("%s: %v %+v", name, err, m)
		}
		return netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A)
	}
	var pn uint16
	fmt.Sscan(port, &pn)
	connect := func(name string) net.Conn {
		dst := netip.AddrPortFrom(fakeOf(name), pn)
		c1, c2 := net.Pipe()
		go p.ServeTransparent(c2, dst)
		return c1
	}

	c := connect("local.test")
	hello := clientHello(t, "evil.example")[5:]
	go c.Write(records(hello, 20))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, c)
	c.Close()
	if b := <-got; len(b) != 0 {
		t.Errorf("the server got %d bytes", len(b))
	}
	if e := lastEvent(p, true); e.Protocol != "transparent" || e.Decision != Deny || !strings.Contains(e.Reason, `"evil.example" differs`) {
		t.Errorf("event %+v", e)
	}

	c = connect("gone.test")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a connection to a name that does not resolve was answered")
	}
	c.Close()
	if e := lastEvent(p, false); e.Decision != Unresolved {
		t.Errorf("event %+v", e)
	}
}
