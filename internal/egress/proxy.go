package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Budget caps the egress of one run; zero fields are unlimited.
type Budget struct {
	BytesOut    int64
	BytesIn     int64
	Connections int64
}

// Event is one connection attempt through the proxy.
type Event struct {
	Time     time.Time `json:"time"`
	Protocol string    `json:"protocol"` // "http", "connect", "socks5", "transparent", "dns"
	Host     string    `json:"host"`
	Addr     string    `json:"addr,omitempty"`
	Port     uint16    `json:"port"`
	Rule     string    `json:"rule,omitempty"`
	Decision string    `json:"decision"` // "allow" or "deny"
	Reason   string    `json:"reason"`
	BytesOut int64     `json:"bytes_out"`
	BytesIn  int64     `json:"bytes_in"`
}

// Proxy carries the sandbox's connections that the policy allows. It speaks
// HTTP forward proxy, CONNECT and SOCKS5 on the same connection, told apart
// by the first byte.
type Proxy struct {
	Policy *Policy
	Budget Budget
	// Resolve looks a name up; nil uses the host's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a pinned address; nil uses net.Dialer.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// OnDeny is called with each denial's reason, for cordon's stderr.
	OnDeny func(reason string)
	// OnDecision is called with a copy of each decision as it is made (an
	// allow, a deny, or a tunnel denied after the fact), for the audit log;
	// the byte counts come later, in Events.
	OnDecision func(Event)
	// NoSNICheck lets tunnels carry any server name; only test builds set
	// it, to show that the escape probe for it can fail.
	NoSNICheck bool

	mu        sync.Mutex
	events    []*Event
	conns     int64
	out, in   int64
	exhausted string
	// upstream are the connections open upstream; closed, whether Close
	// was called.
	upstream map[net.Conn]bool
	closed   bool

	// Transparent mode: the names the resolver answered, by fake address.
	fakeByName map[string]netip.Addr
	nameByFake map[netip.Addr]string
	nextFake   netip.Addr
}

// Events returns every attempt so far, with its bytes.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Event, len(p.events))
	for i, e := range p.events {
		out[i] = *e
	}
	return out
}

// Exhausted names the budget that was used up ("bytes_out", "bytes_in",
// "connections"), or "".
func (p *Proxy) Exhausted() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exhausted
}

// Totals returns the bytes sent and received through the proxy.
func (p *Proxy) Totals() (out, in int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out, p.in
}

const handshakeTimeout = 10 * time.Second

// Serve handles one client connection and closes it.
func (p *Proxy) Serve(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(c, maxHello+5)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		p.serveSOCKS(c, br)
		return
	}
	p.serveHTTP(c, br)
}

// decide resolves the destination once, checks every address, and returns
// the allowed ones, to which the connection is pinned (no second lookup, so
// no DNS rebinding); it records the event.
func (p *Proxy) decide(proto, host string, port uint16, method string) (*Event, []netip.AddrPort) {
	ev := &Event{Time: time.Now(), Protocol: proto, Host: host, Port: port}
	p.mu.Lock()
	p.events = append(p.events, ev)
	p.mu.Unlock()
	deny := func(rule, reason string) (*Event, []netip.AddrPort) {
		ev.Decision, ev.Rule, ev.Reason = "deny", rule, reason
		p.decided(ev)
		return ev, nil
	}
	if why := p.overBudget(true); why != "" {
		return deny("", fmt.Sprintf("%s:%d: the egress budget is used up (%s)", host, port, why))
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		resolve := p.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		found, err := resolve(ctx, host)
		cancel()
		if err != nil || len(found) == 0 {
			// Deny rules and unresolvable names are reported alike.
			d := p.Policy.Check(Request{Host: host, Port: port, Method: method})
			return deny(d.Rule, d.Reason)
		}
		addrs = found
	}
	var first Decision
	var allowed []netip.AddrPort
	for i, a := range addrs {
		d := p.Policy.Check(Request{Host: host, Port: port, Addr: a.Unmap(), Method: method})
		if d.Allow {
			if allowed == nil {
				ev.Decision, ev.Rule, ev.Reason, ev.Addr = "allow", d.Rule, d.Reason, a.Unmap().String()
			}
			allowed = append(allowed, netip.AddrPortFrom(a.Unmap(), port))
		} else if i == 0 {
			first = d
		}
	}
	if allowed == nil {
		ev.Addr = addrs[0].Unmap().String()
		return deny(first.Rule, first.Reason)
	}
	p.mu.Lock()
	p.conns++
	p.mu.Unlock()
	p.decided(ev)
	return ev, allowed
}

// decided tells OnDeny and OnDecision about a decision just made.
func (p *Proxy) decided(ev *Event) {
	p.mu.Lock()
	e := *ev
	p.mu.Unlock()
	if e.Decision == "deny" && p.OnDeny != nil {
		p.OnDeny(e.Reason)
	}
	if p.OnDecision != nil {
		p.OnDecision(e)
	}
}

// overBudget says which budget is used up; counting a new connection when
// conn is set.
func (p *Proxy) overBudget(conn bool) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.Budget
	switch {
	case p.exhausted != "":
	case b.BytesOut > 0 && p.out >= b.BytesOut:
		p.exhausted = "bytes_out"
	case b.BytesIn > 0 && p.in >= b.BytesIn:
		p.exhausted = "bytes_in"
	case conn && b.Connections > 0 && p.conns >= b.Connections:
		p.exhausted = "connections"
	}
	return p.exhausted
}

// errClosed is what a dial gets once the proxy is closed.
var errClosed = errors.New("the sandbox has ended")

// Close ends every connection the proxy holds open upstream, so that their
// relays end and their byte counts are final; nothing is dialled after.
// cordon closes a sandbox's proxy when the sandbox has ended.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	ups := p.upstream
	p.upstream = nil
	p.mu.Unlock()
	for c := range ups {
		c.Close()
	}
}

// hangUp closes an upstream connection and forgets it.
func (p *Proxy) hangUp(c net.Conn) {
	p.mu.Lock()
	delete(p.upstream, c)
	p.mu.Unlock()
	c.Close()
}

// dial connects to the first of the allowed addresses that answers, and
// records which one in the event. The connection is closed with hangUp.
func (p *Proxy) dial(ev *Event, to []netip.AddrPort) (net.Conn, error) {
	var firstErr error
	for _, a := range to {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		var c net.Conn
		var err error
		if p.Dial != nil {
			c, err = p.Dial(ctx, a)
		} else {
			var d net.Dialer
			c, err = d.DialContext(ctx, "tcp", a.String())
		}
		cancel()
		if err == nil {
			p.mu.Lock()
			ev.Addr = a.Addr().String()
			closed := p.closed
			if !closed {
				if p.upstream == nil {
					p.upstream = map[net.Conn]bool{}
				}
				p.upstream[c] = true
			}
			p.mu.Unlock()
			if closed {
				c.Close()
				return nil, errClosed
			}
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// serveHTTP handles CONNECT and absolute-form requests.
func (p *Proxy) serveHTTP(c net.Conn, br *bufio.Reader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method == http.MethodConnect {
		host, port, err := hostPort(req.Host, 0)
		if err != nil {
			writeDenied(c, req.Host, err.Error())
			return
		}
		ev, to := p.decide("connect", host, port, "")
		if ev.Decision != "allow" {
			writeDenied(c, req.Host, ev.Reason)
			return
		}
		up, err := p.dial(ev, to)
		if err != nil {
			p.fail(ev, err)
			fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n\r\ncordon: %s: %v\n", req.Host, err)
			return
		}
		defer p.hangUp(up)
		io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
		c.SetReadDeadline(time.Time{})
		p.splice(ev, c, br, up, host)
		return
	}
	if req.URL == nil || req.URL.Host == "" || req.URL.Scheme != "http" {
		writeDenied(c, req.Host, "only http:// URLs are proxied as requests; use CONNECT (HTTPS_PROXY) for https")
		return
	}
	host, port, err := hostPort(req.URL.Host, 80)
	if err != nil {
		writeDenied(c, req.URL.Host, err.Error())
		return
	}
	ev, to := p.decide("http", host, port, req.Method)
	if ev.Decision != "allow" {
		writeDenied(c, req.URL.Host, ev.Reason)
		return
	}
	up, err := p.dial(ev, to)
	if err != nil {
		p.fail(ev, err)
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n\r\ncordon: %s: %v\n", req.URL.Host, err)
		return
	}
	defer p.hangUp(up)
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true // one request per connection
	req.RequestURI = ""
	cw := &countWriter{p: p, ev: ev, w: up, out: true}
	if err := req.Write(cw); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	// Counted as it is written, so that the response is in the event by
	// the time the client has it.
	io.Copy(&countWriter{p: p, ev: ev, w: c}, up)
}

// checkSNI looks at what a tunnel's client sends first: the server name of
// a TLS ClientHello must be the host the tunnel was opened for, and so must
// the Host header of a plain HTTP request when the tunnel was opened by name
// (a tunnel to an IP, which only an address rule opens, is often reached by
// a client that resolved a name itself). Other protocols pass.
func (p *Proxy) checkSNI(ev *Event, br *bufio.Reader, host string) bool {
	name, what := "", ""
	start := peekStart(br)
	if len(start) >= 5 && start[0] == tlsHandshake && start[1] == 3 {
		if sni, ok := peekSNI(br); ok {
			name, what = sni, "TLS server name"
		}
	} else if httpMethodStart(start) {
		if h, ok := peekHTTPHost(br); ok {
			name, what = h, "HTTP Host"
		}
	}
	if name == "" || strings.EqualFold(strings.TrimSuffix(name, "."), strings.TrimSuffix(host, ".")) {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil && what == "HTTP Host" {
		return true
	}
	p.mu.Lock()
	ev.Decision = "deny"
	ev.Reason = fmt.Sprintf("%s:%d: the %s %q differs from the tunnel's host", host, ev.Port, what, name)
	p.mu.Unlock()
	p.decided(ev)
	return false
}

// peekHTTPHost returns the host of the Host header of a plain HTTP request
// at the start of br, without consuming it. ok is false when the stream
// does not start with an HTTP method.
func peekHTTPHost(br *bufio.Reader) (host string, ok bool) {
	first, err := br.Peek(8)
	if err != nil || !httpMethodStart(first) {
		return "", false
	}
	for {
		b, _ := br.Peek(br.Buffered())
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			if br.Buffered() >= maxHello {
				return "", true // headers too large to inspect: no name seen
			}
			if _, err := br.Peek(br.Buffered() + 1); err != nil {
				return "", true
			}
			continue
		}
		for _, line := range strings.Split(string(b[:end]), "\r\n")[1:] {
			if k, v, found := strings.Cut(line, ":"); found && strings.EqualFold(strings.TrimSpace(k), "Host") {
				h := strings.TrimSpace(v)
				if hh, _, err := net.SplitHostPort(h); err == nil {
					h = hh
				}
				return strings.Trim(h, "[]"), true
			}
		}
		return "", true
	}
}

// httpMethods are the request lines' starts that the Host check reads.
var httpMethods = []string{"GET ", "HEAD ", "POST ", "PUT ", "PATCH ", "DELETE ", "OPTIONS "}

func httpMethodStart(b []byte) bool {
	for _, m := range httpMethods {
		if bytes.HasPrefix(b, []byte(m)) {
			return true
		}
	}
	return false
}

// tlsHandshake is the content type of a TLS record carrying a ClientHello.
const tlsHandshake = 0x16

// peekStart returns the first bytes the client sent once they tell whether
// the stream starts a TLS record or an HTTP request: it waits for the first
// byte, and for more only while what came could still begin either. A
// client that speaks a protocol of its own with a short first message is
// not held up; one that starts a ClientHello or a request line is read
// until it can be checked, however slowly it sends.
func peekStart(br *bufio.Reader) []byte {
	b, err := br.Peek(1)
	for err == nil {
		b, _ = br.Peek(br.Buffered())
		if !undecided(b) {
			return b
		}
		_, err = br.Peek(len(b) + 1)
	}
	return b
}

// undecided reports whether b is a proper beginning of a TLS record header
// or of an HTTP request line's method.
func undecided(b []byte) bool {
	if b[0] == tlsHandshake && len(b) < 5 && (len(b) < 2 || b[1] == 3) {
		return true
	}
	for _, m := range httpMethods {
		if len(b) < len(m) && bytes.HasPrefix([]byte(m), b) {
			return true
		}
	}
	return false
}

func (p *Proxy) fail(ev *Event, err error) {
	p.mu.Lock()
	ev.Reason += fmt.Sprintf("; the connection failed: %v", err)
	p.mu.Unlock()
}

// writeDenied answers an HTTP client with 403 and the reason.
func writeDenied(c net.Conn, dest, reason string) {
	body := fmt.Sprintf("cordon denied the connection to %s: %s\n", dest, reason)
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nX-Cordon-Denied: %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		strings.NewReplacer("\r", " ", "\n", " ").Replace(reason), len(body), body)
}

// hostPort splits "host:port", with def when the port is missing.
func hostPort(hp string, def uint16) (string, uint16, error) {
	host, portText, err := net.SplitHostPort(hp)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("%q: want host:port", hp)
		}
		return strings.Trim(hp, "[]"), def, nil
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("%q: bad port", hp)
	}
	return host, uint16(port), nil
}

// splice copies both ways until either side ends, counting bytes and
// cutting the connection when a byte budget is used up. Nothing the client
// sends goes out before its TLS ClientHello, if it starts with one, names
// host (servers that speak first are not held up).
func (p *Proxy) splice(ev *Event, client net.Conn, clientR *bufio.Reader, up net.Conn, host string) {
	done := make(chan struct{}, 2)
	go func() {
		if p.NoSNICheck || p.checkSNI(ev, clientR, host) {
			// What the check read goes first, then the rest straight
			// from the connection.
			if n := clientR.Buffered(); n > 0 {
				b, _ := clientR.Peek(n)
				_, err := (&countWriter{p: p, ev: ev, w: up, out: true}).Write(b)
				clientR.Discard(n)
				if err == nil {
					p.relay(ev, up, client, true)
				}
			} else {
				p.relay(ev, up, client, true)
			}
		} else {
			up.Close()
			client.Close()
		}
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		p.relay(ev, client, up, false)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

// spliceChunk is how much the kernel moves between two counts of a relay.
const spliceChunk = 1 << 20

// relay copies a tunnel's bytes from src to dst until src ends, counting
// them (out: sent by the sandbox). With no byte budget for that direction
// and TCP on both sides, the kernel moves the bytes (splice): the count is
// current to the last chunk while the tunnel is open, exact when this side
// ends; with
// a budget, every write is counted against it before it is made, and the
// copy stops when the budget is used up.
func (p *Proxy) relay(ev *Event, dst net.Conn, src net.Conn, out bool) {
	limit := p.Budget.BytesIn
	if out {
		limit = p.Budget.BytesOut
	}
	tcpDst, ok := dst.(*net.TCPConn)
	if _, tcpSrc := src.(*net.TCPConn); limit > 0 || !ok || !tcpSrc {
		io.Copy(&countWriter{p: p, ev: ev, w: dst, out: out}, src)
		return
	}
	for {
		n, err := tcpDst.ReadFrom(&io.LimitedReader{R: src, N: spliceChunk})
		p.mu.Lock()
		if out {
			p.out += n
			ev.BytesOut += n
		} else {
			p.in += n
			ev.BytesIn += n
		}
		p.mu.Unlock()
		if err != nil || n < spliceChunk {
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// errBudget stops a copy when a byte budget is used up.
var errBudget = errors.New("egress budget used up")

type countWriter struct {
	p   *Proxy
	ev  *Event
	w   io.Writer
	out bool
}

func (cw *countWriter) Write(b []byte) (int, error) {
	p := cw.p
	p.mu.Lock()
	limit, used := p.Budget.BytesIn, p.in
	if cw.out {
		limit, used = p.Budget.BytesOut, p.out
	}
	if limit > 0 && used+int64(len(b)) > limit {
		b = b[:max(0, limit-used)]
	}
	if cw.out {
		p.out += int64(len(b))
		cw.ev.BytesOut += int64(len(b))
	} else {
		p.in += int64(len(b))
		cw.ev.BytesIn += int64(len(b))
	}
	p.mu.Unlock()
	n, err := cw.w.Write(b)
	if err != nil {
		return n, err
	}
	if why := p.overBudget(false); why != "" {
		p.mu.Lock()
		cw.ev.Reason += fmt.Sprintf("; cut: the egress budget (%s) is used up", why)
		p.mu.Unlock()
		return n, errBudget
	}
	return n, nil
}

// SOCKS5 (RFC 1928) reply codes.
const (
	socksOK             = 0x00
	socksFailure        = 0x01
	socksNotAllowed     = 0x02
	socksHostUnreach    = 0x04
	socksCmdUnsupported = 0x07
	socksAddrUnsupport  = 0x08
)

// serveSOCKS handles a SOCKS5 CONNECT without authentication. BIND and UDP
// ASSOCIATE are refused: only TCP leaves, and only through here.
func (p *Proxy) serveSOCKS(c net.Conn, br *bufio.Reader) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, 0})
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		b := make([]byte, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.Unmap().String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, socksAddrUnsupport)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return
	}
	port := binary.BigEndian.Uint16(pb[:])
	if req[1] != 1 {
		what := map[byte]string{2: "BIND", 3: "UDP ASSOCIATE"}[req[1]]
		ev := &Event{Time: time.Now(), Protocol: "socks5", Host: host, Port: port, Decision: "deny",
			Reason: fmt.Sprintf("%s:%d: SOCKS5 %s is refused: only TCP connections leave the sandbox (no UDP, no DNS over UDP)", host, port, what)}
		p.record(ev)
		p.decided(ev)
		socksReply(c, socksCmdUnsupported)
		return
	}
	ev, to := p.decide("socks5", host, port, "")
	if ev.Decision != "allow" {
		socksReply(c, socksNotAllowed)
		return
	}
	up, err := p.dial(ev, to)
	if err != nil {
		p.fail(ev, err)
		socksReply(c, socksHostUnreach)
		return
	}
	defer p.hangUp(up)
	socksReply(c, socksOK)
	c.SetReadDeadline(time.Time{})
	p.splice(ev, c, br, up, host)
}

func socksReply(c net.Conn, code byte) {
	c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}
