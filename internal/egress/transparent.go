package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// FakeNet is where the names cordon's resolver answers point inside the
// sandbox, in transparent mode: each allowed name gets an address of its own
// there, and a connection to it is a connection to that name, decided and
// resolved by the proxy like any other. The range is a special one, so a
// connection to an address the resolver did not give out is refused.
var FakeNet = netip.MustParsePrefix("198.18.0.0/15")

// fake returns the address standing for name, giving it one if needed.
func (p *Proxy) fake(name string) netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fakeByName == nil {
		p.fakeByName, p.nameByFake = map[string]netip.Addr{}, map[netip.Addr]string{}
		p.nextFake = FakeNet.Addr().Next()
	}
	if a, ok := p.fakeByName[name]; ok {
		return a
	}
	a := p.nextFake
	if FakeNet.Contains(a.Next()) {
		p.nextFake = a.Next()
	}
	p.fakeByName[name], p.nameByFake[a] = a, name
	return a
}

// nameOf returns the name a fake address stands for.
func (p *Proxy) nameOf(a netip.Addr) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, ok := p.nameByFake[a]
	return name, ok
}

// nameAllowed reports whether some allow rule names host (whatever the
// port), and no deny rule refuses it on every port.
func (p *Proxy) nameAllowed(host string) bool {
	for _, r := range p.Policy.Deny {
		if r.Ports == nil && r.matchesHost(host) {
			return false
		}
	}
	for _, r := range p.Policy.Allow {
		if r.matchesHost(host) {
			return true
		}
	}
	return false
}

// ServeDNS answers the sandbox's DNS queries on pc until it is closed: A
// queries for allowed names get the name's fake address, other allowed
// queries an empty answer, and names no rule allows do not exist.
func (p *Proxy) ServeDNS(pc net.PacketConn) {
	defer pc.Close()
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := p.answerDNS(buf[:n]); resp != nil {
			pc.WriteTo(resp, from)
		}
	}
}

func (p *Proxy) answerDNS(query []byte) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(query)
	if err != nil {
		return nil
	}
	q, err := parser.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	resp := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true},
		Questions: []dnsmessage.Question{q},
	}
	if !validName(name) || !p.nameAllowed(name) {
		// NXDOMAIN: for this sandbox the name does not exist (REFUSED makes
		// resolvers retry and clients report a temporary failure).
		resp.Header.RCode = dnsmessage.RCodeNameError
		if q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeAAAA {
			reason := fmt.Sprintf("DNS: no rule allows %s", safeName(name))
			ev := &Event{Time: time.Now(), Protocol: "dns", Host: safeName(name), Port: 53, Decision: Deny, Reason: reason}
			p.record(ev)
			p.decided(ev)
		}
	} else if q.Type == dnsmessage.TypeA {
		a := p.fake(name)
		resp.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
			Body:   &dnsmessage.AResource{A: a.As4()},
		}}
	}
	out, err := resp.Pack()
	if err != nil {
		return nil
	}
	return out
}

func (p *Proxy) record(ev *Event) {
	p.mu.Lock()
	if len(p.events) < MaxEvents {
		p.events = append(p.events, ev)
	} else {
		// Decided, counted and budgeted as any other; only not kept.
		p.unlisted++
	}
	p.mu.Unlock()
}

// ServeTransparent handles a connection the sandbox made to dst, which the
// redirect in its namespace sent here: a fake address stands for its name,
// any other address for itself. The decision is the proxy's, and what the
// tunnel carries is checked as for CONNECT. A refused connection, or one to
// a name that did not resolve, is reset.
func (p *Proxy) ServeTransparent(c net.Conn, dst netip.AddrPort) {
	defer c.Close()
	host := dst.Addr().String()
	if name, ok := p.nameOf(dst.Addr()); ok {
		host = name
	}
	// Reset, so that the client sees a refusal rather than an empty
	// answer.
	reset := func() {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	if !p.admit("transparent", host, dst.Port()) {
		reset()
		return
	}
	defer p.leave()
	ev, to := p.decide("transparent", host, dst.Port(), "")
	if ev.Decision != Allow {
		reset()
		return
	}
	up, err := p.dial(ev, to)
	if err != nil {
		p.fail(ev, err)
		return
	}
	defer p.hangUp(up)
	cc := newClientConn(c, false)
	defer cc.release()
	t := p.newTunnel(ev, cc, up, host)
	t.run(t.send, false)
}
