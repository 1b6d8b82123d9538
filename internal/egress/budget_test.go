package egress

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// budgetCut waits until every event of p that carried bytes notes the cut
// for the budget named why, and returns the events.
func budgetCut(t *testing.T, p *Proxy, why string) []Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := p.Events()
		cut := 0
		for _, e := range ev {
			if strings.Contains(e.Reason, "; cut: the egress budget ("+why+") is used up") {
				cut++
			}
		}
		if cut > 0 && cut == len(ev) {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v: no cut for %s", ev, why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A byte budget that ends in the middle of a stream lets exactly its bytes
// through, counts exactly them, and cuts the tunnel saying why; both ways.
func TestByteBudgetEndsMidStream(t *testing.T) {
	const budget, size = 1<<20 + 4321, 4 << 20
	for _, out := range []bool{true, false} {
		got := make(chan int64, 1)
		target := serve(t, func(c net.Conn) {
			if out {
				n, _ := io.Copy(io.Discard, c)
				got <- n
				return
			}
			c.Write(make([]byte, size)) // fails once the tunnel is cut
		})
		b, why := Budget{BytesIn: budget}, "bytes_in"
		if out {
			b, why = Budget{BytesOut: budget}, "bytes_out"
		}
		p := &Proxy{Policy: mustPolicy(t, []string{target}, nil), Budget: b}
		c, br := openTunnel(t, startProxy(t, p), target)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var passed int64
		if out {
			go c.Write(make([]byte, size)) // fails once the tunnel is cut
			io.Copy(io.Discard, br)
			select {
			case passed = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the target never saw the tunnel end")
			}
		} else {
			var err error
			if passed, err = io.Copy(io.Discard, br); err != nil {
				t.Fatalf("reading the tunnel: %v", err)
			}
		}
		if passed != budget {
			t.Errorf("%s: %d bytes passed, budget %d", why, passed, budget)
		}
		ev := budgetCut(t, p, why)
		sent, received := p.Totals()
		if out && (ev[0].BytesOut != budget || ev[0].BytesIn != 0 || sent != budget || received != 0) ||
			!out && (ev[0].BytesIn != budget || ev[0].BytesOut != 0 || received != budget || sent != 0) {
			t.Errorf("%s: event %+v, totals %d out %d in; want %d", why, ev[0], sent, received, budget)
		}
		if p.Exhausted() != why {
			t.Errorf("exhausted %q, want %q", p.Exhausted(), why)
		}
	}
}

// Tunnels that share a budget, sending at once, together send exactly the
// budget, and count exactly what each sent.
func TestByteBudgetShared(t *testing.T) {
	const budget, size, tunnels = 3<<20 + 77, 4 << 20, 3
	got := make(chan int64, tunnels)
	target := serve(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		got <- n
	})
	p := &Proxy{Policy: mustPolicy(t, []string{target}, nil), Budget: Budget{BytesOut: budget}}
	proxy := startProxy(t, p)
	// Every tunnel is open before any sends.
	var conns []net.Conn
	var readers []io.Reader
	for range tunnels {
		c, br := openTunnel(t, proxy, target)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		conns, readers = append(conns, c), append(readers, br)
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		br := readers[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			go c.Write(make([]byte, size)) // fails once the tunnel is cut
			io.Copy(io.Discard, br)
		}()
	}
	wg.Wait()
	var passed int64
	for range tunnels {
		select {
		case n := <-got:
			passed += n
		case <-time.After(10 * time.Second):
			t.Fatal("a target never saw its tunnel end")
		}
	}
	var counted int64
	for _, e := range p.Events() {
		counted += e.BytesOut
	}
	if sent, _ := p.Totals(); passed != budget || counted != budget || sent != budget {
		t.Errorf("%d bytes passed, %d counted in events, %d in all; budget %d", passed, counted, sent, budget)
	}
}
