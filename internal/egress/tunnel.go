package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tunnel is one allowed connection the proxy carries: the sandbox's side,
// the upstream side, and the event that counts what passes between them.
type tunnel struct {
	p      *Proxy
	ev     *Event
	client *clientConn
	up     net.Conn
	// host is the destination as the client named it; byName, whether
	// that is a name rather than an IP.
	host   string
	byName bool
	idle   time.Duration
	// last is when bytes last crossed the tunnel, either way (UnixNano).
	last atomic.Int64
	once sync.Once
}

func (p *Proxy) newTunnel(ev *Event, cc *clientConn, up net.Conn, host string) *tunnel {
	t := &tunnel{p: p, ev: ev, client: cc, up: up, host: host, idle: p.idleTimeout}
	if t.idle == 0 {
		t.idle = IdleTimeout
	}
	_, err := netip.ParseAddr(host)
	t.byName = err != nil
	t.touch()
	cc.open(t)
	return t
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// quiet is how long the tunnel has carried nothing.
func (t *tunnel) quiet() time.Duration { return time.Since(time.Unix(0, t.last.Load())) }

// shut closes both sides, once; note, if any, is added to the event's
// reason.
func (t *tunnel) shut(note string) {
	t.once.Do(func() {
		if note != "" {
			t.p.mu.Lock()
			t.ev.Reason += note
			t.p.mu.Unlock()
		}
		t.client.conn.Close()
		t.p.hangUp(t.up)
	})
}

// run carries the tunnel until both directions have ended. send carries
// the client's side; what the upstream sends is relayed to the client as
// it comes, so that servers that speak first are not held up. A direction
// that ends cleanly closes its side for writing (the other goes on); one
// that fails shuts both. oneShot (a forwarded request) ends the exchange
// when the response ends. A tunnel that carries nothing, either way, for
// the idle timeout is cut. Each tunnel holds two goroutines besides the
// caller's, and buffers of bounded size.
func (t *tunnel) run(send func() error, oneShot bool) {
	done := make(chan struct{}, 2)
	go func() {
		if err := send(); err != nil {
			t.shut("")
		} else if !oneShot {
			closeWrite(t.up)
		}
		done <- struct{}{}
	}()
	go func() {
		if err := t.relay(t.client.conn, t.up, false); err != nil || oneShot {
			t.shut("")
		} else {
			closeWrite(t.client.conn)
		}
		done <- struct{}{}
	}()
	tick := time.NewTicker(max(t.idle/4, time.Millisecond))
	defer tick.Stop()
	for ended := 0; ended < 2; {
		select {
		case <-done:
			ended++
		case <-tick.C:
			if t.quiet() >= t.idle {
				t.shut(fmt.Sprintf("; cut: nothing crossed the tunnel for %v", t.idle))
			}
		}
	}
}

// relay copies a tunnel's bytes from src to dst until src ends, counting
// them (out: sent by the sandbox); nil means src ended cleanly. Every read
// is counted before it is written, against the byte budget of its direction
// when there is one, and the copy stops when the budget is used up. Between
// two TCP connections the kernel moves the bytes (splice); otherwise they
// are copied through a buffer.
func (t *tunnel) relay(dst, src net.Conn, out bool) error {
	if handled, err := t.splice(dst, src, out); handled {
		return err
	}
	b := getCopyBuf()
	defer putCopyBuf(b)
	buf := *b
	for {
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			if _, werr := t.write(dst, buf[:n], out); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// errBudget stops a copy when a byte budget is used up.
var errBudget = errors.New("egress budget used up")

// write sends b to dst, counted as sent by the sandbox (out) or received.
// With a byte budget for that direction it sends no more than what is left
// of it, and errBudget once the budget is used up. The bytes are counted
// before they are written.
func (t *tunnel) write(dst net.Conn, b []byte, out bool) (int, error) {
	b = b[:t.count(int64(len(b)), out)]
	n, err := dst.Write(b)
	if n > 0 {
		t.touch()
	}
	if err != nil {
		return n, err
	}
	return n, t.budgetLeft()
}

// count counts n bytes about to be sent (out) or received, and returns how
// many of them the byte budget of that direction lets through: all of them
// without one.
func (t *tunnel) count(n int64, out bool) int64 {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	limit, used := p.Budget.BytesIn, p.in
	if out {
		limit, used = p.Budget.BytesOut, p.out
	}
	if limit > 0 && used+n > limit {
		n = max(0, limit-used)
	}
	if out {
		p.out += n
		t.ev.BytesOut += n
	} else {
		p.in += n
		t.ev.BytesIn += n
	}
	return n
}

// budgetLeft returns errBudget, and notes the cut in the event, once a
// budget is used up.
func (t *tunnel) budgetLeft() error {
	p := t.p
	if why := p.overBudget(false); why != "" {
		p.mu.Lock()
		t.ev.Reason += fmt.Sprintf("; cut: the egress budget (%s) is used up", why)
		p.mu.Unlock()
		return errBudget
	}
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// errRefused ends a tunnel the proxy cut for what the client sent.
var errRefused = errors.New("refused")

// refuse cuts the tunnel for what the client sent: its event becomes a
// denial, with the reason.
func (t *tunnel) refuse(format string, args ...any) error {
	p := t.p
	p.mu.Lock()
	t.ev.Decision = Deny
	t.ev.Reason = fmt.Sprintf("%s:%d: ", safeName(t.host), t.ev.Port) + fmt.Sprintf(format, args...)
	p.mu.Unlock()
	p.decided(t.ev)
	t.shut("")
	return errRefused
}

// send carries what the client sends into the tunnel, looking at how it
// starts: a TLS ClientHello must name the tunnel's host, and so must every
// plain HTTP request (unless the tunnel was opened to an IP, which only an
// address rule opens, and which a client that resolved a name itself
// reaches); any other protocol is relayed as it is. Nothing the client sends
// goes out before the check of what it starts with has passed.
func (t *tunnel) send() error {
	br := t.client.br
	if t.p.NoSNICheck {
		return t.relayClient(br)
	}
	for {
		switch peekStart(br) {
		case startTLS:
			held, name, err := readClientHello(br)
			if err != nil {
				return t.refuse("the TLS ClientHello cannot be inspected (%v); the connection is cut", err)
			}
			if name != "" && !sameHost(name, t.host) {
				return t.refuse(`the TLS server name "%s" differs from the tunnel's host`, safeName(name))
			}
			if _, err := t.write(t.up, held, true); err != nil {
				return err
			}
			// The rest is encrypted: relayed as it is.
			return t.relayClient(br)
		case startHTTP:
			if !t.byName {
				return t.relayClient(br)
			}
			err := t.sendHTTP(br)
			if errors.Is(err, errSwitched) {
				// A request switched protocols (Upgrade, CONNECT):
				// what follows is looked at afresh, so that a
				// further HTTP request or ClientHello is checked,
				// and anything else (WebSocket frames, say) is
				// relayed as it is.
				continue
			}
			if errors.Is(err, errNotHTTP) {
				return t.relayClient(br)
			}
			return err
		default:
			return t.relayClient(br)
		}
	}
}

// relayClient sends what br holds, then relays the client's connection as it
// is until it ends.
func (t *tunnel) relayClient(br *bufio.Reader) error {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		_, err := t.write(t.up, b, true)
		br.Discard(n)
		if err != nil {
			return err
		}
	}
	return t.relay(t.up, t.client.conn, true)
}

// sameHost reports whether name, as a TLS server name or HTTP Host gives
// it, is host.
func sameHost(name, host string) bool {
	return strings.EqualFold(strings.TrimSuffix(name, "."), strings.TrimSuffix(host, "."))
}

// What a stream starts with.
type start int

const (
	startOther start = iota // a protocol of its own: relayed as it is
	startTLS                // a TLS ClientHello
	startHTTP               // perhaps an HTTP/1 request: its first line tells
)

// peekStart tells what the client's stream starts with, from its first
// bytes, without consuming them: it waits for the first byte, and for more
// only while what came could still begin a ClientHello or an HTTP request
// line, up to the reader's buffer (a longer token is taken for the start of
// a request line, which sendHTTP reads on). A client that speaks a protocol
// of its own with a short first message is not held up; one that starts a
// ClientHello or a request line is read until it can be checked, however
// slowly it sends.
func peekStart(br *bufio.Reader) start {
	b, err := br.Peek(1)
	for err == nil {
		b, _ = br.Peek(br.Buffered())
		s, more := classify(b)
		if !more {
			return s
		}
		_, err = br.Peek(len(b) + 1)
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		return startHTTP
	}
	return startOther
}

// classify tells what b, the first bytes of a stream, start with; more
// reports that more bytes could change the answer. An HTTP request may be
// preceded by empty lines (RFC 9112, 2.2) and, for lenient servers, blanks;
// its method is a token (RFC 9110, 5.6.2) followed by a blank.
func classify(b []byte) (s start, more bool) {
	if len(b) == 0 {
		return startOther, true
	}
	if b[0] == tlsHandshake {
		if looksLikeTLS(b) {
			return startTLS, false
		}
		return startOther, mayBeTLS(b)
	}
	i := 0
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	j := i
	for j < len(b) && isTchar(b[j]) {
		j++
	}
	switch {
	case j == len(b):
		return startHTTP, true
	case j > i && (b[j] == ' ' || b[j] == '\t'):
		return startHTTP, false
	}
	return startOther, false
}

// isBlank reports whether c may come before a request line.
func isBlank(c byte) bool { return c == '\r' || c == '\n' || c == ' ' || c == '\t' }

// isTchar reports whether c is a token character (RFC 9110, 5.6.2).
func isTchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
