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
