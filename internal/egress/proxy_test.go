package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// startProxy serves p on a loopback listener. Its dialer refuses anything but
// loopback, so that a bug can never send traffic elsewhere.
func startProxy(t testing.TB, p *Proxy) string {
	t.Helper()
	p.Dial = func(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
		if !to.Addr().IsLoopback() {
			t.Errorf("the proxy dialled %s", to)
			return nil, fmt.Errorf("test dialer: only loopback")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", to.String())
	}
	if p.Resolve == nil {
		p.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "internal.test":
				return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
			case "local.test":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		}
	}
	return serve(t, p.Serve)
}

func client(proxyAddr string) *http.Client {
	u, _ := url.Parse("http://" + proxyAddr)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

func portOf(t *testing.T, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestHTTPForwardAllowAndDeny(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") }))
	defer other.Close()
	p := &Proxy{Policy: mustPolicy(t, []string{"127.0.0.1:" + portOf(t, srv.URL)}, nil)}
	c := client(startProxy(t, p))

	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "page" {
		t.Fatalf("allowed: %d %q", resp.StatusCode, body)
	}

	resp, err = c.Get(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Cordon-Denied"), "loopback") || !strings.Contains(string(body), "--allow 127.0.0.1:"+portOf(t, other.URL)) {
		t.Fatalf("denied: %d %q %q", resp.StatusCode, resp.Header.Get("X-Cordon-Denied"), body)
	}
	ev := p.Events()
	if len(ev) != 2 || ev[0].Decision != "allow" || ev[1].Decision != "deny" || ev[0].BytesIn == 0 {
		t.Fatalf("events %+v", ev)
	}
}

func TestConnectDenials(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls page") }))
	defer tlsSrv.Close()
	port := portOf(t, tlsSrv.URL)
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port, "internal.test"}, nil)}
	addr := startProxy(t, p)

	connect := func(target string) (*http.Response, net.Conn) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp, conn
	}
	for _, tt := range []struct{ target, reason string }{
		{"169.254.169.254:80", "link-local (cloud metadata)"},
		{"internal.test:443", "resolves to 10.0.0.5, a private address"},
		{"[fd00:ec2::254]:80", "private"},
	} {
		resp, conn := connect(tt.target)
		conn.Close()
		if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Cordon-Denied"), tt.reason) {
			t.Errorf("CONNECT %s: %d %q", tt.target, resp.StatusCode, resp.Header.Get("X-Cordon-Denied"))
		}
	}

	// The name the TLS client asks for must be the tunnel's host.
	resp, conn := connect("local.test:" + port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT allowed host: %d", resp.StatusCode)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: "evil.example", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Error("TLS with a different server name went through")
	}
	conn.Close()

	if resp, conn = connect("local.test:" + port); resp.StatusCode != 200 {
		t.Fatalf("CONNECT by name: %d", resp.StatusCode)
	}
	tc = tls.Client(conn, &tls.Config{ServerName: "local.test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Errorf("TLS with the tunnel's name: %v", err)
	}
	conn.Close()

	var sniDenied bool
	for _, e := range p.Events() {
		sniDenied = sniDenied || strings.Contains(e.Reason, `TLS server name "evil.example" differs`)
	}
	if !sniDenied {
		t.Errorf("no SNI denial among %+v", p.Events())
	}
}

func TestSOCKS5(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "socks page") }))
	defer srv.Close()
	port := portOf(t, srv.URL)
	p := &Proxy{Policy: mustPolicy(t, []string{"127.0.0.1:" + port}, nil)}
	addr := startProxy(t, p)

	socks := func(cmd byte, dst netip.AddrPort) (byte, net.Conn) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{5, 1, 0})
		var r [2]byte
		io.ReadFull(c, r[:])
		a := dst.Addr().As4()
		req := []byte{5, cmd, 0, 1, a[0], a[1], a[2], a[3], byte(dst.Port() >> 8), byte(dst.Port())}
		c.Write(req)
		var rep [10]byte
		if _, err := io.ReadFull(c, rep[:]); err != nil {
			t.Fatal(err)
		}
		return rep[1], c
	}
	code, c := socks(1, netip.MustParseAddrPort("127.0.0.1:"+port))
	if code != socksOK {
		t.Fatalf("allowed connect: reply %d", code)
	}
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if !bytes.Contains(b, []byte("socks page")) {
		t.Fatalf("through SOCKS: %q", b)
	}
	code, c = socks(1, netip.MustParseAddrPort("169.254.169.254:80"))
	c.Close()
	if code != socksNotAllowed {
		t.Errorf("metadata: reply %d, want %d", code, socksNotAllowed)
	}
	code, c = socks(3, netip.MustParseAddrPort("127.0.0.53:53"))
	c.Close()
	if code != socksCmdUnsupported {
		t.Errorf("UDP ASSOCIATE: reply %d, want %d", code, socksCmdUnsupported)
	}
	var udp bool
	for _, e := range p.Events() {
		udp = udp || strings.Contains(e.Reason, "UDP ASSOCIATE is refused")
	}
	if !udp {
		t.Errorf("no UDP denial in %+v", p.Events())
	}
}

func TestByteBudgetCutsUpload(t *testing.T) {
	var got int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	p := &Proxy{Policy: mustPolicy(t, []string{"127.0.0.1:" + portOf(t, srv.URL)}, nil), Budget: Budget{BytesOut: 1 << 20}}
	c := client(startProxy(t, p))
	_, err := c.Post(srv.URL, "application/octet-stream", bytes.NewReader(make([]byte, 10<<20)))
	if err == nil && got >= 10<<20 {
		t.Fatal("the whole upload went through")
	}
	if p.Exhausted() != "bytes_out" {
		t.Fatalf("exhausted %q", p.Exhausted())
	}
	if out, _ := p.Totals(); out > 1<<20 {
		t.Errorf("sent %d bytes, budget 1MiB", out)
	}
	// New connections are refused, saying why.
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Cordon-Denied"), "egress budget") {
		t.Errorf("after the budget: %d %q", resp.StatusCode, resp.Header.Get("X-Cordon-Denied"))
	}
}

func TestParseClientHello(t *testing.T) {
	// A real ClientHello, captured from crypto/tls.
	hello := clientHello(t, "example.org")
	held, name, err := readClientHello(bufio.NewReader(bytes.NewReader(hello)))
	if err != nil || name != "example.org" || !bytes.Equal(held, hello) {
		t.Fatalf("got %q %v, %d of %d bytes", name, err, len(held), len(hello))
	}
	// Without a server name: parses, no name.
	held, name, err = readClientHello(bufio.NewReader(bytes.NewReader(clientHello(t, ""))))
	if err != nil || name != "" {
		t.Errorf("no SNI: got %q %v", name, err)
	}
	if looksLikeTLS([]byte("GET / HTTP/1.1\r\n")) {
		t.Error("plain HTTP read as TLS")
	}
}

func FuzzParseClientHello(f *testing.F) {
	f.Add([]byte{1, 0, 0, 40})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseClientHello(b) // must not panic
		// Nor may reading it as records, which reads no more than its
		// bounds.
		held, _, _ := readClientHello(bufio.NewReader(bytes.NewReader(b)))
		if len(held) > maxHello+maxRecord+5*maxHelloRecords {
			t.Fatalf("held %d bytes", len(held))
		}
	})
}

// BenchmarkThroughput compares bulk transfer through the proxy (CONNECT)
// with a direct loopback connection, and reports the ratio.
func BenchmarkThroughput(b *testing.B) {
	const size = 64 << 20
	// Each transfer is timed until the receiver has read all of it.
	received := make(chan int64, 1)
	target := serve(b, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received <- n
	})
	p := &Proxy{Policy: mustPolicy(b, []string{target}, nil)}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer pl.Close()
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			go p.Serve(c)
		}
	}()
	buf := make([]byte, 1<<20)
	send := func(c net.Conn) {
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		c.Close()
	}
	timeIt := func(through bool) float64 {
		start := time.Now()
		c, err := net.Dial("tcp", map[bool]string{true: pl.Addr().String(), false: target}[through])
		if err != nil {
			b.Fatal(err)
		}
		if through {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
				b.Fatalf("CONNECT: %v %v", resp, err)
			}
		}
		send(c)
		if n := <-received; n != size {
			b.Fatalf("received %d bytes, sent %d", n, size)
		}
		return float64(size) / time.Since(start).Seconds() / (1 << 20)
	}
	var direct, proxied float64
	for b.Loop() {
		direct += timeIt(false)
		proxied += timeIt(true)
	}
	b.ReportMetric(direct/float64(b.N), "direct-MiB/s")
	b.ReportMetric(proxied/float64(b.N), "proxied-MiB/s")
	b.ReportMetric(proxied/direct, "proxied/direct")
}

func TestTunnelHostMustMatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") }))
	defer srv.Close()
	port := portOf(t, srv.URL)
	p := &Proxy{Policy: mustPolicy(t, []string{"local.test:" + port}, nil)}
	addr := startProxy(t, p)
	for _, tt := range []struct {
		host string
		ok   bool
	}{{"local.test", true}, {"elsewhere.example", false}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		fmt.Fprintf(c, "CONNECT local.test:%s HTTP/1.1\r\nHost: local.test:%s\r\n\r\n", port, port)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tt.host)
		b, _ := io.ReadAll(br)
		c.Close()
		if got := bytes.Contains(b, []byte("page")); got != tt.ok {
			t.Errorf("Host %s: got page %v, want %v (%q)", tt.host, got, tt.ok, b)
		}
	}
}

// Every decision reaches OnDecision as it is made: an allowed request, a
// denied one, each once.
func TestOnDecision(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") }))
	defer up.Close()
	host := strings.TrimPrefix(up.URL, "http://")
	var mu sync.Mutex
	var got []Event
	p := &Proxy{Policy: mustPolicy(t, []string{host}, nil), OnDecision: func(e Event) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}}
	c := client(startProxy(t, p))
	for _, u := range []string{up.URL + "/", "http://10.9.9.9/"} {
		if resp, err := c.Get(u); err == nil {
			resp.Body.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Decision != "allow" || got[0].Host != "127.0.0.1" || got[1].Decision != "deny" || !strings.Contains(got[1].Reason, "10.9.9.9") {
		t.Fatalf("got %+v", got)
	}
}

// A tunnel's bytes, moved by the kernel, are counted to the byte, both ways.
func TestTunnelCountsSplicedBytes(t *testing.T) {
	const up, down = 3<<20 + 123, 1<<20 + 7
	target := serve(t, func(c net.Conn) {
		io.CopyN(io.Discard, c, up)
		c.Write(make([]byte, down))
	})
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil)}
	c, br := openTunnel(t, startProxy(t, p), target)
	if _, err := c.Write(make([]byte, up)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	if n, err := io.Copy(io.Discard, br); err != nil || n != down {
		t.Fatalf("read %d bytes back (%v), want %d", n, err, down)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := p.Events()
		if len(ev) == 1 && ev[0].BytesOut == up && ev[0].BytesIn == down {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v; want %d bytes out and %d in", ev, up, down)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkConnectSetup times a connection's setup and first round trip,
// directly and as a CONNECT tunnel through the proxy.
func BenchmarkConnectSetup(b *testing.B) {
	target := serve(b, func(c net.Conn) { io.Copy(c, c) })
	proxy := startProxy(b, &Proxy{Policy: mustPolicy(b, []string{target}, nil)})
	roundTrip := func(c net.Conn, r io.Reader) {
		var one [1]byte
		if _, err := c.Write(one[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, one[:]); err != nil {
			b.Fatal(err)
		}
	}
	var direct, proxied time.Duration
	for b.Loop() {
		start := time.Now()
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		roundTrip(c, c)
		direct += time.Since(start)
		c.Close()

		start = time.Now()
		c, br := openTunnel(b, proxy, target)
		roundTrip(c, br)
		proxied += time.Since(start)
		c.Close()
	}
	b.ReportMetric(float64(direct.Microseconds())/float64(b.N), "direct-µs")
	b.ReportMetric(float64(proxied.Microseconds())/float64(b.N), "proxied-µs")
	b.ReportMetric(float64(proxied)/float64(direct), "proxied/direct")
}

// peekStart waits for no more than a first message that is neither TLS nor
// HTTP, and for the whole start of one that could be, however slowly it
// comes.
func TestPeekStart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		parts []string
		want  start
	}{
		{"one byte of a protocol of its own", []string{"\x00"}, startOther},
		{"a short command", []string{"PING\r\n"}, startOther},
		{"a TLS record header byte by byte", []string{"\x16", "\x03", "\x01", "\x02", "\x00", "\x01"}, startTLS},
		{"a method in pieces", []string{"GE", "T", " /"}, startHTTP},
		{"a custom method", []string{"FRO", "BNICATE", "\t/"}, startHTTP},
		{"empty lines, then a method", []string{"\r\n", "\r\n", "TRACE "}, startHTTP},
		{"looks like TLS, then is not", []string{"\x16", "x"}, startOther},
		{"a TLS record of another version", []string{"\x16\x00\x01\x00\x10\x01"}, startTLS},
		{"looks like a method, then is not", []string{"GE", "\x00"}, startOther},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c1, c2 := net.Pipe()
			defer c1.Close()
			go func() {
				for _, p := range tt.parts {
					c1.Write([]byte(p))
					time.Sleep(5 * time.Millisecond)
				}
			}()
			got := make(chan start, 1)
			go func() { got <- peekStart(bufio.NewReader(c2)) }()
			select {
			case g := <-got:
				if g != tt.want {
					t.Errorf("got %v, want %v", g, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("peekStart waited for bytes that never come")
			}
			c2.Close()
		})
	}
}

// A tunnel carries a protocol whose client sends one byte and waits for
// the answer.
func TestTunnelShortFirstMessage(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(c, c) })
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil)}
	c, br := openTunnel(t, startProxy(t, p), target)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{7})
	if b, err := br.ReadByte(); err != nil || b != 7 {
		t.Fatalf("echo: %v %v", b, err)
	}
}

// serve serves every connection on loopback with handle, each in its own
// goroutine, closing it after; it returns the address.
func serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
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
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// openTunnel opens a CONNECT tunnel to target through the proxy at proxy,
// and returns the connection and a reader of what comes back through it.
func openTunnel(t testing.TB, proxy, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c, br
}

// Closing the proxy ends the tunnels it holds open upstream, so that what
// they carried is counted, to the byte, even when the server keeps the
// connection open; nothing is dialled after.
func TestCloseEndsTunnels(t *testing.T) {
	target := serve(t, func(c net.Conn) {
		c.Write(make([]byte, 1000))
		io.Copy(io.Discard, c) // and keep the connection open
	})
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil)}
	proxy := startProxy(t, p)
	c, br := openTunnel(t, proxy, target)
	if _, err := io.ReadFull(br, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := p.Events()
		if len(ev) == 1 && ev[0].BytesIn == 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v; want the 1000 bytes in", ev)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Error("the tunnel is still open")
	}
	c2, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	if resp, err := http.ReadResponse(bufio.NewReader(c2), nil); err != nil || resp.StatusCode != 502 {
		t.Errorf("a tunnel after Close: %v %v; want 502", resp, err)
	}
}

// clientHello returns the first TLS record crypto/tls sends for a handshake
// with serverName ("" sends none): one ClientHello.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	go tls.Client(c1, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake()
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(c2, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(c2, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}
