package egress

import (
	"bufio"
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
	// Denied is how many refused attempts (deny decisions) the run may
	// make; the one after uses the budget up.
	Denied int64
}

// Decisions an Event records.
const (
	// Allow: the connection was made (a tunnel may still be cut later, and
	// then becomes a denial).
	Allow = "allow"
	// Deny: the policy refused the connection, or what it carried.
	Deny = "deny"
	// Unresolved: an allowed name did not resolve; nothing was refused,
	// the client got a gateway error.
	Unresolved = "unresolved"
)

// Event is one connection attempt through the proxy.
type Event struct {
	Time     time.Time `json:"time"`
	Protocol string    `json:"protocol"` // "http", "connect", "socks5", "transparent", "dns", "proxy"
	Host     string    `json:"host"`
	Addr     string    `json:"addr,omitempty"`
	Port     uint16    `json:"port"`
	Rule     string    `json:"rule,omitempty"`
	Decision string    `json:"decision"` // Allow, Deny or Unresolved
	Reason   string    `json:"reason"`
	BytesOut int64     `json:"bytes_out"`
	BytesIn  int64     `json:"bytes_in"`
}

// Limits of the proxy on the host, whatever the sandbox sends.
const (
	// handshakeTimeout bounds the proxy handshake (the request head, the
	// SOCKS5 exchange), each lookup and each dial.
	handshakeTimeout = 10 * time.Second
	// IdleTimeout cuts a tunnel that carries nothing, either way, for
	// this long.
	IdleTimeout = 10 * time.Minute
	// MaxConns is the most connections one proxy (one sandbox) carries at
	// once; more are refused at once, as denials.
	MaxConns = 256
	// maxHead is the most bytes of a request line and headers read, from
	// the proxy's own requests (a larger one gets 431) and from each
	// request in a plain HTTP tunnel (a larger one cuts it).
	maxHead = 64 << 10
	// clientBuf is the size of the buffer on the client's side of a
	// connection.
	clientBuf = 4 << 10
)

// Proxy carries the sandbox's connections that the policy allows. It speaks
// HTTP forward proxy, CONNECT and SOCKS5 on the same connection, told apart
// by the first byte.
type Proxy struct {
	// Policy does not change once the proxy serves: its decisions on
	// names are kept.
	Policy *Policy
	Budget Budget
	// Resolve looks a name up; nil uses the host's resolver. Only names an
	// allow rule names are looked up.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a pinned address; nil uses net.Dialer.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// OnDeny is called with each denial's reason, for cordon's stderr.
	OnDeny func(reason string)
	// OnDecision is called with a copy of each decision as it is made (an
	// allow, a deny, an unresolved name, or a tunnel denied after the
	// fact), for the audit log; the byte counts come later, in Events.
	OnDecision func(Event)
	// OnDenialsUsedUp is called once, when the budget of denials is used
	// up: cordon then ends the run, as a probing agent is.
	OnDenialsUsedUp func()
	// NoSNICheck lets tunnels carry any server name; only test builds set
	// it, to show that the escape probe for it can fail. So do LookupFirst
	// (every name looked up before it is checked) and NoHeadLimit (a
	// request head read however long).
	NoSNICheck, LookupFirst, NoHeadLimit bool

	// maxConns and idleTimeout replace MaxConns and IdleTimeout when set
	// (tests).
	maxConns    int
	idleTimeout time.Duration

	mu        sync.Mutex
	events    []*Event
	unlisted  int // events past MaxEvents, not kept
	conns     int64
	denied    int64
	active    int
	out, in   int64
	exhausted string
	// upstream are the connections open upstream; closed, whether Close
	// was called.
	upstream map[net.Conn]bool
	closed   bool

	// names are the decisions on names before their lookup (checkName).
	namesMu sync.Mutex
	names   map[nameKey]Decision

	// Transparent mode: the names the resolver answered, by fake address.
	fakeByName map[string]netip.Addr
	nameByFake map[netip.Addr]string
	nextFake   netip.Addr
}

// MaxEvents is how many attempts a proxy keeps for the outcome: a sandbox
// that connects without end cannot grow cordon by it. Later attempts are
// decided, counted and budgeted all the same.
const MaxEvents = 4096

// Unlisted is how many attempts were not kept, past MaxEvents.
func (p *Proxy) Unlisted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unlisted
}

// Events returns the attempts kept so far (the first MaxEvents), with
// their bytes.
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
// "connections", "max_denied"), or "".
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

// Serve handles one client connection and closes it.
func (p *Proxy) Serve(c net.Conn) {
	defer c.Close()
	if !p.admit("proxy", "", 0) {
		return
	}
	defer p.leave()
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	cc := newClientConn(c, !p.NoHeadLimit)
	defer cc.release()
	first, err := cc.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		p.serveSOCKS(cc)
		return
	}
	p.serveHTTP(cc)
}

// admit counts a new client connection, or refuses it, as a denial, when
// the proxy already carries its most.
func (p *Proxy) admit(proto, host string, port uint16) bool {
	p.mu.Lock()
	limit := p.maxConns
	if limit == 0 {
		limit = MaxConns
	}
	ok := p.active < limit
	if ok {
		p.active++
	}
	p.mu.Unlock()
	if ok {
		return true
	}
	dest := ""
	if host != "" {
		dest = fmt.Sprintf("%s:%d: ", safeName(host), port)
	}
	ev := &Event{Time: time.Now(), Protocol: proto, Host: safeName(host), Port: port, Decision: Deny,
		Reason: fmt.Sprintf("%srefused: the proxy already carries %d connections of this sandbox, the most it carries at once", dest, limit)}
	p.record(ev)
	p.decided(ev)
	return false
}

// leave ends what admit counted.
func (p *Proxy) leave() {
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
}

// lookup resolves an allowed name on the host.
func (p *Proxy) lookup(host string) ([]netip.Addr, error) {
	resolve := p.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	found, err := resolve(ctx, host)
	if err == nil && len(found) == 0 {
		err = errors.New("no addresses")
	}
	return found, err
}

// decide checks the destination and returns the allowed addresses, to which
// the connection is pinned; it records the event, whose Decision the caller
// answers: Allow, Deny, or Unresolved. A name is checked against the rules
// before anything else, and looked up only when an allow rule names it, so
// that a name no rule allows never reaches the host's resolver; it is looked
// up once, and every address it resolves to is checked (no second lookup, so
// no DNS rebinding).
func (p *Proxy) decide(proto, host string, port uint16, method string) (*Event, []netip.AddrPort) {
	ev := &Event{Time: time.Now(), Protocol: proto, Host: safeName(host), Port: port}
	p.record(ev)
	end := func(decision, rule, reason string) (*Event, []netip.AddrPort) {
		p.mu.Lock()
		ev.Decision, ev.Rule, ev.Reason = decision, rule, reason
		p.mu.Unlock()
		p.decided(ev)
		return ev, nil
	}
	if why := p.overBudget(true); why != "" {
		return end(Deny, "", fmt.Sprintf("%s:%d: the egress budget is used up (%s)", safeName(host), port, why))
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		if p.LookupFirst { // test builds only
			p.lookup(host)
		}
		valid, d := p.checkName(host, port, method)
		if !valid {
			return end(Deny, "", fmt.Sprintf("%s:%d: not a valid host name", safeName(host), port))
		}
		if !d.Allow {
			return end(Deny, d.Rule, d.Reason)
		}
		found, err := p.lookup(host)
		if err != nil {
			return end(Unresolved, "", fmt.Sprintf("%s:%d: the lookup of the name failed: %v", safeName(host), port, err))
		}
		addrs = found
	}
	var first Decision
	var allowed []netip.AddrPort
	for i, a := range addrs {
		d := p.Policy.Check(Request{Host: host, Port: port, Addr: a.Unmap(), Method: method})
		if d.Allow {
			if allowed == nil {
				p.mu.Lock()
				ev.Decision, ev.Rule, ev.Reason, ev.Addr = Allow, d.Rule, d.Reason, a.Unmap().String()
				p.mu.Unlock()
			}
			allowed = append(allowed, netip.AddrPortFrom(a.Unmap(), port))
		} else if i == 0 {
			first = d
		}
	}
	if allowed == nil {
		p.mu.Lock()
		ev.Addr = addrs[0].Unmap().String()
		p.mu.Unlock()
		return end(Deny, first.Rule, first.Reason)
	}
	p.mu.Lock()
	p.conns++
	p.mu.Unlock()
	p.decided(ev)
	return ev, allowed
}

// decided counts a decision just made against the budget of denials and
// tells OnDeny and OnDecision about it.
func (p *Proxy) decided(ev *Event) {
	p.mu.Lock()
	e := *ev
	usedUp := false
	if e.Decision == Deny {
		p.denied++
		if b := p.Budget.Denied; b > 0 && p.denied > b && p.exhausted == "" {
			p.exhausted, usedUp = "max_denied", true
		}
	}
	p.mu.Unlock()
	if usedUp && p.OnDenialsUsedUp != nil {
		p.OnDenialsUsedUp()
	}
	if e.Decision == Deny && p.OnDeny != nil {
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

// errHeadTooLarge is what reading a request's head past maxHead gives.
var errHeadTooLarge = fmt.Errorf("the request line and headers are over %d bytes", maxHead)

// clientConn is the sandbox's side of one proxy connection, read through a
// buffer. While the proxy reads its own request the reads are capped, so
// that a request head larger than maxHead fails instead of growing without
// bound; once a tunnel carries the connection, each read marks it active.
type clientConn struct {
	conn   net.Conn
	br     *bufio.Reader
	capped bool
	read   int64 // bytes read while capped
	t      *tunnel
}

func newClientConn(c net.Conn, capped bool) *clientConn {
	cc := &clientConn{conn: c, capped: capped}
	cc.br = getReader(cc)
	return cc
}

// release gives back the reader's buffer, once nothing reads the
// connection any more.
func (cc *clientConn) release() { putReader(cc.br) }

// Read reads the connection for br.
func (cc *clientConn) Read(b []byte) (int, error) {
	if cc.capped {
		// The buffer may read ahead of the head by one fill; headTooLarge
		// says exactly how much of the head was used.
		left := maxHead + clientBuf - cc.read
		if left <= 0 {
			return 0, errHeadTooLarge
		}
		b = b[:min(int64(len(b)), left)]
	}
	n, err := cc.conn.Read(b)
	if cc.capped {
		cc.read += int64(n)
	}
	if n > 0 && cc.t != nil {
		cc.t.touch()
	}
	return n, err
}

// headTooLarge reports whether the head read so far is over maxHead.
func (cc *clientConn) headTooLarge() bool {
	return cc.read-int64(cc.br.Buffered()) > maxHead
}

// open hands the connection to a tunnel: reads are no longer capped nor
// timed, and mark the tunnel active.
func (cc *clientConn) open(t *tunnel) {
	cc.capped, cc.t = false, t
	cc.conn.SetReadDeadline(time.Time{})
}

// serveHTTP handles CONNECT and absolute-form requests.
func (p *Proxy) serveHTTP(cc *clientConn) {
	c := cc.conn
	req, err := http.ReadRequest(cc.br)
	if errors.Is(err, errHeadTooLarge) || err == nil && cc.headTooLarge() {
		writeStatus(c, http.StatusRequestHeaderFieldsTooLarge, "", fmt.Sprintf("cordon: %v\n", errHeadTooLarge))
		lingerClose(c)
		return
	}
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
		if ev.Decision != Allow {
			answerHTTP(c, req.Host, ev)
			return
		}
		up, err := p.dial(ev, to)
		if err != nil {
			p.fail(ev, err)
			writeStatus(c, http.StatusBadGateway, "", fmt.Sprintf("cordon: %s: %v\n", safeName(req.Host), err))
			return
		}
		defer p.hangUp(up)
		io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
		t := p.newTunnel(ev, cc, up, host)
		t.run(t.send, false)
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
	if ev.Decision != Allow {
		answerHTTP(c, req.URL.Host, ev)
		return
	}
	up, err := p.dial(ev, to)
	if err != nil {
		p.fail(ev, err)
		writeStatus(c, http.StatusBadGateway, "", fmt.Sprintf("cordon: %s: %v\n", safeName(req.URL.Host), err))
		return
	}
	defer p.hangUp(up)
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true // one request per connection
	req.RequestURI = ""
	t := p.newTunnel(ev, cc, up, host)
	// The response is counted before it is written (as every relay
	// counts), so that it is in the event by the time the client has it.
	send := func() error {
		return req.Write(writerFunc(func(b []byte) (int, error) { return t.write(up, b, true) }))
	}
	t.run(send, true)
}

// writerFunc is a function that is an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *Proxy) fail(ev *Event, err error) {
	p.mu.Lock()
	ev.Reason += fmt.Sprintf("; the connection failed: %v", err)
	p.mu.Unlock()
}

// answerHTTP tells an HTTP client why its request goes no further: 403 for
// a denial, 502 for a name that did not resolve.
func answerHTTP(c net.Conn, dest string, ev *Event) {
	if ev.Decision == Unresolved {
		writeStatus(c, http.StatusBadGateway, "", fmt.Sprintf("cordon: %s\n", ev.Reason))
		return
	}
	writeDenied(c, dest, ev.Reason)
}

// writeDenied answers an HTTP client with 403 and the reason.
func writeDenied(c net.Conn, dest, reason string) {
	writeStatus(c, http.StatusForbidden, reason, fmt.Sprintf("cordon denied the connection to %s: %s\n", safeName(dest), reason))
}

// writeStatus answers an HTTP client with status and body, and closes the
// exchange; denied, when set, goes in X-Cordon-Denied. The body's first
// line also ends the status line: a client refused a CONNECT shows nothing
// else of the answer (Python's and Go's show the status line, curl -v
// shows it with the headers).
func writeStatus(c net.Conn, status int, denied, body string) {
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "HTTP/1.1 %d %s", status, http.StatusText(status))
	if why := statusWhy(body); why != "" {
		fmt.Fprintf(&hdr, " (%s)", why)
	}
	hdr.WriteString("\r\n")
	if denied != "" {
		fmt.Fprintf(&hdr, "X-Cordon-Denied: %s\r\n", strings.NewReplacer("\r", " ", "\n", " ").Replace(denied))
	}
	fmt.Fprintf(&hdr, "Content-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	io.WriteString(c, hdr.String()+body)
}

// statusWhy is body's first line as a status line may carry it: printable
// ASCII, at most maxWhy bytes.
func statusWhy(body string) string {
	const maxWhy = 200
	line, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
	b := []byte(strings.TrimSpace(line))
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	if len(b) > maxWhy {
		b = append(b[:maxWhy-3], "..."...)
	}
	return string(b)
}

// lingerClose closes c for writing and reads, for a moment and up to a
// bound, what the client still sends, so that the answer just written
// reaches it before the connection is closed (closing with unread input
// would reset the connection, and the answer with it).
func lingerClose(c net.Conn) {
	closeWrite(c)
	c.SetReadDeadline(time.Now().Add(time.Second))
	io.CopyN(io.Discard, c, 1<<20)
}

// hostPort splits "host:port", with def when the port is missing.
func hostPort(hp string, def uint16) (string, uint16, error) {
	host, portText, err := net.SplitHostPort(hp)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("%q: want host:port", safeName(hp))
		}
		return strings.Trim(hp, "[]"), def, nil
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("%q: bad port", safeName(hp))
	}
	return host, uint16(port), nil
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
func (p *Proxy) serveSOCKS(cc *clientConn) {
	c, br := cc.conn, cc.br
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
		if what == "" {
			what = fmt.Sprintf("command %d", req[1])
		}
		ev := &Event{Time: time.Now(), Protocol: "socks5", Host: safeName(host), Port: port, Decision: Deny,
			Reason: fmt.Sprintf("%s:%d: SOCKS5 %s is refused: only TCP connections leave the sandbox (no UDP, no DNS over UDP)", safeName(host), port, what)}
		p.record(ev)
		p.decided(ev)
		socksReply(c, socksCmdUnsupported)
		return
	}
	ev, to := p.decide("socks5", host, port, "")
	switch ev.Decision {
	case Unresolved:
		socksReply(c, socksHostUnreach)
		return
	case Deny:
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
	t := p.newTunnel(ev, cc, up, host)
	t.run(t.send, false)
}

func socksReply(c net.Conn, code byte) {
	c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}
