package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPServer returns the http.Server of the API, with the configuration's
// bounds: header time and size, idle keep-alive time, and the per-request
// deadlines of bodies and answers (set by each request, so that a long
// upload or stream that progresses is not cut). Serve it on Listener(ln).
func (s *Server) HTTPServer() *http.Server {
	h := s.opts.Config.HTTP
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: h.readHeader,
		IdleTimeout:       h.idle,
		MaxHeaderBytes:    h.headerBytes,
		ConnState:         s.conns.state,
	}
}

// Listener bounds the connections ln accepts: at most max_connections
// open, at most max_connections_per_remote of one remote address. A
// connection past the remote's bound is answered at once (429) and
// closed, its descriptor given back. When every connection is taken, the
// one that has waited longest without a request under way (idle, or
// still sending its headers) is closed to make room; when every one is
// serving a request, the new one is answered 503 and closed.
func (s *Server) Listener(ln net.Listener) net.Listener {
	s.conns.Listener = ln
	return s.conns
}

// connLimiter is a listener that bounds open connections, in all and per
// remote.
type connLimiter struct {
	net.Listener
	max, perRemote int
	refused        func(reason string)

	mu       sync.Mutex
	open     map[*limitedConn]struct{}
	byRemote map[string]int
}

func newConnLimiter(max, perRemote int, refused func(string)) *connLimiter {
	return &connLimiter{max: max, perRemote: perRemote, refused: refused,
		open: map[*limitedConn]struct{}{}, byRemote: map[string]int{}}
}

// Refusals: a whole answer, written to a new connection's empty buffer
// without waiting, then the connection is closed.
const (
	refusedFull   = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 52\r\n\r\n{\"error\":\"too many connections to the server now\"}\n\n"
	refusedRemote = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 52\r\n\r\n{\"error\":\"too many connections from your address\"}\n\n"
)

// Accept returns the next connection within the bounds; those past them
// are refused here.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		remote := remoteKey(c.RemoteAddr().String())
		lc, refusal, evict := l.admit(c, remote)
		if evict != nil {
			evict.Close()
		}
		if lc != nil {
			return lc, nil
		}
		reason := "max_connections"
		if refusal == refusedRemote {
			reason = "max_connections_per_remote"
		}
		if l.refused != nil {
			l.refused(reason)
		}
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write([]byte(refusal))
		c.Close()
	}
}

// admit takes c into the open connections, or says which refusal it gets;
// evict is an idle connection to close to make room.
func (l *connLimiter) admit(c net.Conn, remote string) (lc *limitedConn, refusal string, evict *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byRemote[remote] >= l.perRemote {
		return nil, refusedRemote, nil
	}
	if len(l.open) >= l.max {
		// Room is made by closing a connection without a request under
		// way (idle between requests, or still sending its first
		// request's headers, as slowloris does): of the address that
		// holds the most connections, the one that waited longest. One
		// whose request is being answered is never closed, and a client
		// with a connection or two is the last to lose one.
		for o := range l.open {
			if st := http.ConnState(o.state.Load()); st != http.StateIdle && st != http.StateNew {
				continue
			}
			if evict == nil {
				evict = o
				continue
			}
			mine, theirs := l.byRemote[o.remote], l.byRemote[evict.remote]
			if mine > theirs || mine == theirs && o.since.Load() < evict.since.Load() {
				evict = o
			}
		}
		if evict == nil {
			return nil, refusedFull, nil
		}
		l.forget(evict)
	}
	lc = &limitedConn{Conn: c, l: l, remote: remote}
	lc.since.Store(time.Now().UnixNano())
	l.open[lc] = struct{}{}
	l.byRemote[remote]++
	return lc, "", evict
}

// forget drops c from the counts; the caller holds the lock.
func (l *connLimiter) forget(c *limitedConn) {
	if _, ok := l.open[c]; !ok {
		return
	}
	delete(l.open, c)
	if l.byRemote[c.remote]--; l.byRemote[c.remote] <= 0 {
		delete(l.byRemote, c.remote)
	}
}

// count returns the open connections.
func (l *connLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// state is the http.Server's ConnState hook: it notes which connections
// are idle between requests (those may be closed to make room).
func (l *connLimiter) state(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	lc.since.Store(time.Now().UnixNano())
	lc.state.Store(int32(st))
}

// limitedConn is an accepted connection, counted until it is closed.
type limitedConn struct {
	net.Conn
	l      *connLimiter
	remote string
	state  atomic.Int32
	since  atomic.Int64 // when it entered its state, Unix ns
	once   sync.Once
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	err := c.Conn.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("closing a connection: %w", err)
	}
	return nil
}

// connRefused counts a connection refused at a bound.
func (s *Server) connRefused(reason string) {
	s.metrics.add(1, "cordon_connections_refused_total", "reason", reason)
}

// plainError makes a configuration error without a file to place it in.
func plainError(_, field, msg string) error {
	return fmt.Errorf("server configuration: %s: %s", field, msg)
}

func init() {
	help["cordon_connections_open"] = [2]string{"gauge", "Open HTTP connections."}
	help["cordon_connections_refused_total"] = [2]string{"counter", "Connections refused at a bound, by bound: max_connections or max_connections_per_remote."}
	help["cordon_rate_limited_total"] = [2]string{"counter", "Requests refused with 429, by limit (token: a token's rate; remote: requests without a valid token, per remote address) and token."}
	help["cordon_requests_unrecorded_total"] = [2]string{"counter", "Requests without a valid token left out of the audit log (past rate_limit.record), by reason; summed up in api_requests_unrecorded records."}
	help["cordon_audit_files_removed_total"] = [2]string{"counter", "Rotated audit log files removed or archived by the retention, by reason."}
}
