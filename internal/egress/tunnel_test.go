package egress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder serves loopback connections that it reads to their end; each
// connection's bytes come out of the channel.
func recorder(t *testing.T) (string, <-chan []byte) {
	t.Helper()
	got := make(chan []byte, 16)
	addr := serve(t, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	})
	return addr, got
}

// through sends in through a tunnel to target (named as dest in CONNECT),
// ends its side, and returns what the target received.
func through(t *testing.T, proxy, dest string, got <-chan []byte, in []byte) []byte {
	t.Helper()
	c, br := openTunnel(t, proxy, dest)
	go io.Copy(io.Discard, br)
	c.Write(in)
	c.(*net.TCPConn).CloseWrite()
	select {
	case b := <-got:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("the target never saw the tunnel end")
		return nil
	}
}

// lastEvent returns the proxy's last event, once it is no longer an allow
// (a tunnel's denial is recorded as it is cut), or the allow after a while.
func lastEvent(p *Proxy, wantDeny bool) Event {
	deadline := time.Now().Add(2 * time.Second)
	for {
		ev := p.Events()
		e := ev[len(ev)-1]
		if !wantDeny || e.Decision == Deny || time.Now().After(deadline) {
			return e
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// records writes a handshake message as TLS records, of the sizes given
// and then of the most a record holds.
func records(msg []byte, sizes ...int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(len(msg), maxRecord)
		if len(sizes) > 0 {
			n, sizes = min(len(msg), sizes[0]), sizes[1:]
		}
		out = append(out, tlsHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// withExtension returns the ClientHello message msg with one more
// extension, its lengths fixed.
func withExtension(t *testing.T, msg []byte, typ uint16, data []byte) []byte {
	t.Helper()
	i := 4 + 2 + 32
	i += 1 + int(msg[i])
	i += 2 + int(binary.BigEndian.Uint16(msg[i:]))
	i += 1 + int(msg[i])
	out := bytes.Clone(msg)
	out = binary.BigEndian.AppendUint16(out, typ)
	out = binary.BigEndian.AppendUint16(out, uint16(len(data)))
	out = append(out, data...)
	binary.BigEndian.PutUint16(out[i:], binary.BigEndian.Uint16(out[i:])+uint16(4+len(data)))
	n := len(out) - 4
	out[1], out[2], out[3] = byte(n>>16), byte(n>>8), byte(n)
	if _, err := parseClientHello(out); err != nil && typ != 0 {
		t.Fatalf("withExtension: %v", err)
	}
	return out
}

// The TLS check reads the whole ClientHello, over however many records it
// spans, and cuts what it cannot read; what passes reaches the server byte
// for byte.
func TestClientHelloAcrossRecords(t *testing.T) {
	target, got := recorder(t)
	port := portOf(t, "http://"+target)
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port}, nil)}
	proxy := startProxy(t, p)
	dest := "local.test:" + port
	own, foreign, none := clientHello(t, "local.test")[5:], clientHello(t, "evil.example")[5:], clientHello(t, "")[5:]
	sni := []byte{0, 15, 0, 0, 12}
	sni = append(sni, "evil.example"...)
	tiny := make([]int, 100)
	for i := range tiny {
		tiny[i] = 1
	}
	for _, tt := range []struct {
		name   string
		in     []byte
		pass   bool
		reason string
	}{
		{"the tunnel's name, one record", records(own), true, ""},
		{"the tunnel's name over two records", records(own, 10), true, ""},
		{"the tunnel's name, its handshake header split", records(own, 2, 1), true, ""},
		{"no server name", records(none), true, ""},
		{"a foreign name over two records", records(foreign, 10), false, `the TLS server name "evil.example" differs`},
		{"a foreign name in the second of many records", records(foreign, 60, 60, 60), false, `"evil.example" differs`},
		{"a second server_name extension", records(withExtension(t, own, 0, sni)), false, "appears twice"},
		{"larger than the check reads", records(withExtension(t, own, 21, make([]byte, 40<<10))), false, "more than the 32768 cordon inspects"},
		{"in too many records", records(own, tiny...), false, "more than 64 TLS records"},
		{"another record in between", append(append(records(own[:10]), 20, 3, 3, 0, 1, 1), records(own[10:])...), false, "type 20"},
		{"a record of another version", append([]byte{tlsHandshake, 0, 1, 0, 40}, own[:40]...), false, "cannot be inspected"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := append(bytes.Clone(tt.in), "and then the rest"...)
			b := through(t, proxy, dest, got, in)
			e := lastEvent(p, !tt.pass)
			if tt.pass {
				if !bytes.Equal(b, in) || e.Decision != Allow {
					t.Errorf("sent %d bytes, the server got %d; event %+v", len(in), len(b), e)
				}
				return
			}
			if len(b) != 0 || e.Decision != Deny || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("the server got %d bytes; event %+v, want a denial saying %q", len(b), e, tt.reason)
			}
		})
	}
}

// Every request of a plain HTTP tunnel, whatever its method, must name the
// tunnel's host; one that does not, or that cannot be read as a server
// would, cuts the tunnel before it is sent.
func TestEveryRequestHostChecked(t *testing.T) {
	target, got := recorder(t)
	port := portOf(t, "http://"+target)
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port, "127.0.0.1:" + port}, nil)}
	proxy := startProxy(t, p)
	const (
		own     = "GET / HTTP/1.1\r\nHost: local.test\r\n\r\n"
		foreign = "GET /2 HTTP/1.1\r\nHost: evil.example\r\n\r\n"
		upgrade = "GET /ws HTTP/1.1\r\nHost: local.test:80\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		chunked = "POST / HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	)
	for _, tt := range []struct {
		name   string
		in     string
		sent   string // what reaches the server; in when the tunnel passes
		reason string // of the denial, "" when it passes
	}{
		{"TRACE, foreign", "TRACE / HTTP/1.1\r\nHost: evil.example\r\n\r\n", "", `the HTTP Host "evil.example" differs`},
		{"a custom method, foreign", "FROBNICATE / HTTP/1.1\r\nHost: evil.example\r\n\r\n", "", "differs"},
		{"a custom method, the tunnel's host", "FROBNICATE / HTTP/1.1\r\nHost: LOCAL.test.:8080\r\n\r\n", "", ""},
		{"a second request, foreign", own + foreign, own, "differs"},
		{"a second request after a body", "POST / HTTP/1.1\r\nHost: local.test\r\nContent-Length: 5\r\n\r\nhello" + foreign, "POST / HTTP/1.1\r\nHost: local.test\r\nContent-Length: 5\r\n\r\nhello", "differs"},
		{"a second request after a chunked body", chunked + "5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n" + foreign, chunked + "5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n", "differs"},
		{"a request in a body is body", chunked + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(foreign), foreign) + own, "", ""},
		{"keep-alive, every request the tunnel's", own + own + "\r\n" + own, "", ""},
		{"an absolute target, foreign", "GET http://evil.example/ HTTP/1.1\r\nHost: local.test\r\n\r\n", "", `target's host "evil.example"`},
		{"CONNECT inside, foreign", "CONNECT evil.example:443 HTTP/1.1\r\nHost: local.test\r\n\r\n", "", "differs"},
		{"lines ending in LF alone", "GET / HTTP/1.1\nHost: evil.example\n\n", "", "differs"},
		{"lines ending in LF alone, the tunnel's host", "GET / HTTP/1.1\nHost: local.test\n\n", "", ""},
		{"empty lines first", "\r\n\r\n" + foreign, "", "differs"},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: evil.example\r\n\r\n", "", "cannot be inspected"},
		{"a folded header", "GET / HTTP/1.1\r\nX: a\r\n Host: evil.example\r\n\r\n", "", "folded"},
		{"a bare CR", "GET / HTTP/1.1\r\nX: a\rHost: evil.example\r\n\r\n", "", "CR inside"},
		{"a header line quoted in the error", "GET / HTTP/1.1\r\nHost: local.test\r\n\x1b]0;owned\x07\r\n\r\n", "", "owned"},
		{"two Host headers", "GET / HTTP/1.1\r\nHost: local.test\r\nHost: evil.example\r\n\r\n", "", "cannot be inspected"},
		{"Transfer-Encoding and Content-Length", "POST / HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", "", "both"},
		{"a chunk longer than its size", chunked + "1\r\nhello\r\n0\r\n\r\n", chunked + "1\r\nh", "longer than its size"},
		{"HTTP/2 without TLS", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", "HTTP/2.0 cannot be inspected"},
		{"a head too large", "GET / HTTP/1.1\r\nHost: local.test\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", "", "more than 65536"},
		{"an upgrade, then frames", upgrade + "\x81\x85\x01\x02\x03\x04hello", "", ""},
		{"an upgrade, then a foreign request", upgrade + foreign, upgrade, "differs"},
		{"a protocol of its own that starts like a request", "SSH-2.0-OpenSSH_9.6 Ubuntu-3\r\n\x00\x00\x01\x14binary", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := through(t, proxy, "local.test:"+port, got, []byte(tt.in))
			e := lastEvent(p, tt.reason != "")
			if strings.ContainsFunc(e.Reason, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("a control character in the reason %q", e.Reason)
			}
			if tt.reason == "" {
				if string(b) != tt.in || e.Decision != Allow {
					t.Errorf("the server got %q; event %+v", b, e)
				}
				return
			}
			if string(b) != tt.sent || e.Decision != Deny || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("the server got %q, want %q; event %+v, want a denial saying %q", b, tt.sent, e, tt.reason)
			}
		})
	}
	// A tunnel opened to an IP carries any Host, as a client that resolved
	// a name itself sends it.
	if b := through(t, proxy, "127.0.0.1:"+port, got, []byte(foreign)); string(b) != foreign {
		t.Errorf("tunnel to an IP: the server got %q", b)
	}
}

// A tunnel that carries nothing, either way, for the idle timeout is cut,
// whether it is being checked or relayed; one that carries a little now and
// then is not.
func TestIdleTunnels(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(c, c) })
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil), idleTimeout: 300 * time.Millisecond}
	proxy := startProxy(t, p)

	for _, first := range []string{"", "x", "GE"} {
		c, br := openTunnel(t, proxy, target)
		if first != "" {
			c.Write([]byte(first))
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		io.Copy(io.Discard, br)
		if d := time.Since(start); d > 3*time.Second || d < 250*time.Millisecond {
			t.Errorf("first %q: the tunnel ended after %v", first, d)
		}
	}
	c, br := openTunnel(t, proxy, target)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range 12 {
		c.Write([]byte{byte(i)})
		if b, err := br.ReadByte(); err != nil || b != byte(i) {
			t.Fatalf("after %d round trips: %v %v", i, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cut := 0
	for _, e := range p.Events() {
		if strings.Contains(e.Reason, "nothing crossed the tunnel for 300ms") {
			cut++
		}
	}
	if cut != 3 {
		t.Errorf("%d idle cuts in %+v", cut, p.Events())
	}
}

// The proxy carries at most so many connections at once; one more is
// refused at once, as a denial, and a place that frees is taken again.
func TestConnectionCap(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(c, c) })
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil), maxConns: 2}
	proxy := startProxy(t, p)
	c1, _ := openTunnel(t, proxy, target)
	openTunnel(t, proxy, target)

	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the third connection: %d %v, want it closed at once", n, err)
	}
	c.Close()
	e := lastEvent(p, true)
	if e.Decision != Deny || e.Protocol != "proxy" || !strings.Contains(e.Reason, "already carries 2 connections") {
		t.Errorf("event %+v", e)
	}
	c1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		active := p.active
		p.mu.Unlock()
		if active < 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed tunnel still counts")
		}
		time.Sleep(10 * time.Millisecond)
	}
	openTunnel(t, proxy, target)
}

// A request head larger than the cap gets 431 and is closed, without the
// proxy holding what it was sent.
func TestHeaderFlood(t *testing.T) {
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:80"}, nil)}
	proxy := startProxy(t, p)
	flood := bytes.Repeat([]byte("a"), 1<<20)
	for _, start := range []string{"GET http://local.test/ HTTP/1.1\r\nX-Flood: ", "CONNECT local.test:443 HTTP/1.1\r\nX: "} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		sent := make(chan int64, 1)
		go func() {
			n, _ := io.WriteString(c, start)
			total := int64(n)
			for total < 64<<20 {
				n, err := c.Write(flood)
				total += int64(n)
				if err != nil {
					break
				}
			}
			sent <- total
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q...: %v", start, err)
		}
		resp.Body.Close()
		c.Close()
		n := <-sent
		runtime.ReadMemStats(&after)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%q...: %d", start, resp.StatusCode)
		}
		grew := after.TotalAlloc - before.TotalAlloc
		if grew > 8<<20 {
			t.Errorf("%q...: %d bytes allocated after %d bytes sent", start, grew, n)
		}
		t.Logf("%q...: %d bytes allocated after %d bytes sent", start, grew, n)
	}
}

// readHead and chunkSize take any bytes, and readHead never holds more
// than maxHead of them.
func FuzzReadHead(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), []byte("5;x\r\n"))
	f.Add([]byte("\r\n\nPOST http://x/ HTTP/1.0\nA: b\n\n"), []byte("0\n"))
	f.Fuzz(func(t *testing.T, in, line []byte) {
		head, start, err := readHead(bufio.NewReaderSize(bytes.NewReader(in), 16), nil)
		if len(head) > maxHead || start >= len(head) {
			t.Fatalf("%q: %d bytes, line at %d, %v", in, len(head), start, err)
		}
		if first, _, _ := bytes.Cut(head[max(start, 0):], []byte("\n")); err == nil && start >= 0 && !requestLine(first) {
			t.Fatalf("%q: %d bytes, line at %d, %v", in, len(head), start, err)
		}
		if n, ok := chunkSize(line); ok && n < 0 {
			t.Fatalf("%q: size %d", line, n)
		}
	})
}
