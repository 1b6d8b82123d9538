package egress

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	a.SetDeadline(time.Now().Add(10 * time.Second))
	b.SetDeadline(time.Now().Add(10 * time.Second))
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// Between two TCP connections the kernel moves the bytes, and splice's
// counts are exact, with and without a budget: every byte, or exactly the
// budget's, passes and is counted.
func TestSpliceCounts(t *testing.T) {
	const size = 3<<20 + 999
	for _, budget := range []int64{0, 2<<20 + 1} {
		p := &Proxy{Budget: Budget{BytesIn: budget}}
		tn := &tunnel{p: p, ev: &Event{}}
		sender, src := tcpPair(t)
		dst, receiver := tcpPair(t)
		go func() {
			sender.Write(make([]byte, size))
			sender.CloseWrite()
		}()
		type result struct {
			handled bool
			err     error
		}
		done := make(chan result, 1)
		go func() {
			h, err := tn.splice(dst, src, false)
			dst.CloseWrite()
			done <- result{h, err}
		}()
		n, err := io.Copy(io.Discard, receiver)
		r := <-done
		want, wantErr := int64(size), error(nil)
		if budget > 0 {
			want, wantErr = budget, errBudget
		}
		if err != nil || !r.handled || r.err != wantErr {
			t.Fatalf("budget %d: read %v; splice handled %v, %v (want %v)", budget, err, r.handled, r.err, wantErr)
		}
		if _, in := p.Totals(); n != want || tn.ev.BytesIn != want || in != want {
			t.Errorf("budget %d: %d bytes passed, %d counted in the event, %d in all; want %d", budget, n, tn.ev.BytesIn, in, want)
		}
	}
}

// A relay holds a pipe only while it moves bytes: open tunnels that wait
// hold none, so that idle tunnels do not use up their user's pipe pages.
func TestWaitingTunnelsHoldNoPipe(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(c, c) })
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil)}
	proxy := startProxy(t, p)
	for range 4 {
		c, br := openTunnel(t, proxy, target)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		go c.Write(make([]byte, 100<<10))
		if _, err := io.ReadFull(br, make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
	}
	// The tunnels are open, and wait for their clients and their server.
	deadline := time.Now().Add(5 * time.Second)
	for held.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pipes held by waiting tunnels", held.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ev := p.Events(); len(ev) != 4 || ev[0].BytesOut != 100<<10 || ev[0].BytesIn != 100<<10 {
		t.Errorf("events %+v", ev)
	}
}

// Many short exchanges through a tunnel, each waited for, all arrive: a
// relay that gives its pipe back while it waits misses no byte that comes
// meanwhile.
func TestTunnelManyRoundTrips(t *testing.T) {
	target := serve(t, func(c net.Conn) { io.Copy(c, c) })
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil)}
	proxy := startProxy(t, p)
	for range 5 {
		c, br := openTunnel(t, proxy, target)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		for i := range 500 {
			if _, err := c.Write([]byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			if b, err := br.ReadByte(); err != nil || b != byte(i) {
				t.Fatalf("round trip %d: %v %v", i, b, err)
			}
		}
		c.Close()
	}
}
