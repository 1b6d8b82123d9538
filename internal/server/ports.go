package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// maxForwards bounds the forwarded requests and WebSockets open at once
// into one sandbox.
const maxForwards = 32

// forwardCSP is the Content-Security-Policy of every forwarded response:
// what a sandbox serves runs in an opaque origin, never in the server's
// own (where the web page keeps an admin's token).
const forwardCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// originWide are answer headers a browser applies to the whole origin
// (the server's own, where its web page is): a sandbox's server never
// sets them.
var originWide = []string{"Clear-Site-Data", "Strict-Transport-Security", "Alt-Svc", "Service-Worker-Allowed",
	"Origin-Agent-Cluster", "Cross-Origin-Opener-Policy", "Cross-Origin-Embedder-Policy", "Permissions-Policy"}

// connector is a sandbox that can connect to its own loopback
// (sandbox.Box).
type connector interface {
	Connect(ctx context.Context, port int) (net.Conn, error)
}

// acquireForward takes one of the sandbox's forwarded connections; false
// when all are in use.
func (s *Server) acquireForward(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forwards == nil {
		s.forwards = map[string]int{}
	}
	if s.forwards[id] >= maxForwards {
		return false
	}
	s.forwards[id]++
	return true
}

func (s *Server) releaseForward(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forwards[id]--; s.forwards[id] <= 0 {
		delete(s.forwards, id)
	}
}

// forward proxies a request to 127.0.0.1:PORT inside the sandbox (HTTP,
// and WebSocket upgrades), for the sandbox's agent or an admin. The
// connection is made by the sandbox's init, in the sandbox's network
// namespace, and passed back: the sandbox gains no way out.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, c caller) int {
	e, status := s.live(w, r, c)
	if e == nil {
		return status
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return fail(w, http.StatusBadRequest, "port: want 1 to 65535, found %q", r.PathValue("port"))
	}
	box, ok := e.box.(connector)
	if !ok {
		return fail(w, http.StatusNotImplemented, "sandbox %s cannot forward ports", e.id)
	}
	if !s.acquireForward(e.id) {
		return fail(w, http.StatusTooManyRequests, "sandbox %s has %d forwarded connections open already", e.id, maxForwards)
	}
	defer s.releaseForward(e.id)
	if !c.viaURL {
		// A request to it is use; one through a port URL is not, or its
		// holder (the sandbox's own page, even) would keep it from its
		// idle timeout.
		e.mu.Lock()
		e.touched = s.opts.Now()
		e.mu.Unlock()
	}
	status = http.StatusBadGateway
	sw := &statusWriter{ResponseWriter: w}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/" + r.PathValue("path"), RawQuery: r.URL.RawQuery}
			pr.Out.Host = pr.Out.URL.Host
			pr.Out.Header.Del("Authorization") // the token stays here
			pr.Out.Header.Del("Cookie")
			// A page opened by a port URL has its capability in its
			// address: the sandbox is not told it.
			pr.Out.Header.Del("Referer")
			// No X-Forwarded-*, nor the signature of the node that
			// forwarded the request here (relay.go), which the sandbox
			// could send again as that node's: the sandbox learns nothing
			// of its callers or of the server's name.
			for _, h := range forwardHeaders {
				pr.Out.Header.Del(h)
			}
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return box.Connect(ctx, port)
			},
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("Set-Cookie")
			// Headers a browser applies to the whole origin (the
			// server's, where its web page keeps an admin's token).
			for _, h := range originWide {
				resp.Header.Del(h)
			}
			resp.Trailer = nil // none announced (see below)
			resp.Header.Set("Content-Security-Policy", forwardCSP)
			resp.Header.Set("X-Content-Type-Options", "nosniff")
			// A page opened by a port URL carries its capability in its
			// own address: no link it holds may send that on.
			resp.Header.Set("Referrer-Policy", "no-referrer")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var ce *sandbox.ConnectError
			switch {
			case errors.As(err, &ce):
				fail(w, http.StatusBadGateway, "sandbox %s: %v", e.id, ce)
			case errors.Is(err, sandbox.ErrEnded):
				fail(w, http.StatusGone, "%s", execError(e, err))
			default:
				fail(w, http.StatusBadGateway, "forwarding to port %d of sandbox %s: %v", port, e.id, err)
			}
		},
	}
	// An informational answer (103 Early Hints, say) would reach the
	// client with the sandbox's headers, past ModifyResponse: only a
	// WebSocket's 101 goes through.
	_, aborted := serveAborting(func() int {
		proxy.ServeHTTP(no1xx{sw}, r)
		return 0
	})
	// Trailers are the sandbox's words as much (a Set-Cookie, say), and
	// the proxy sets them once the body is through: none is sent.
	for k := range w.Header() {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			w.Header().Del(k)
		}
	}
	if sw.status != 0 {
		status = sw.status
	}
	rec := map[string]any{"port": port, "method": r.Method, "path": "/" + r.PathValue("path"), "status": status, "token": c.name()}
	if c.viaURL {
		rec["via"] = "port_url"
	}
	if aborted {
		rec["aborted"] = true // the answer broke off half sent
	}
	s.record(e.id, c, audit.Decision, "port_forward", rec)
	if aborted {
		panic(abortedAnswer{status})
	}
	return status
}

// portRoutes registers the forwarding of a sandbox's ports.
func (s *Server) portRoutes() {
	s.handle(api.Version+"/sandboxes/{id}/ports/{port}/{path...}", anyToken, s.forward)
	s.portURLRoutes()
}

// no1xx passes an answer on but for its informational (1xx) heads, other
// than 101 (a WebSocket's), whose headers no filter saw.
type no1xx struct{ http.ResponseWriter }

func (w no1xx) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets the proxy reach the connection (flushes, a hijack).
func (w no1xx) Unwrap() http.ResponseWriter { return w.ResponseWriter }
