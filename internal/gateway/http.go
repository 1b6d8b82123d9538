package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/token"
)

// HTTPOptions says whom the gateway serves over streamable HTTP.
type HTTPOptions struct {
	// Identify names the client whose bearer token was presented; false
	// for a token that is no client's.
	Identify func(token string) (name string, ok bool)
	// Addr is the address the server listens on (HOST:PORT): its origin,
	// http://Addr (and http://localhost:PORT on loopback), is allowed.
	Addr string
	// Origins are the other browser origins allowed (scheme://host:port).
	Origins []string
	// SessionTimeout ends a session idle this long (default 1h).
	SessionTimeout time.Duration
	// AnyOrigin takes requests from any browser origin: for a server in
	// front that authenticates every request by its bearer token (which a
	// browser never sends on its own), cordon serve.
	AnyOrigin bool
}

// HTTPHandler serves the gateway over streamable HTTP. Before any MCP
// handling, a request whose Origin header is present and not allowed is
// refused (403: a web page the agent's user opened cannot drive the
// gateway), and one without a client's bearer token (Authorization:
// Bearer) is refused (401). A request's body is bounded by MessageCap
// (see bounded). The token's name is the agent (see
// identity.go): its sessions share labels and budgets, and a session is
// served only to the client that opened it.
func (g *Gateway) HTTPHandler(o HTTPOptions) (http.Handler, error) {
	if o.Identify == nil {
		return nil, fmt.Errorf("the MCP gateway over HTTP needs its clients' tokens")
	}
	allowed := map[string]bool{}
	if o.Addr != "" {
		allowed["http://"+strings.ToLower(o.Addr)] = true
		if host, port, err := net.SplitHostPort(o.Addr); err == nil {
			if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
				allowed["http://localhost:"+port] = true
			}
		}
	}
	for _, origin := range o.Origins {
		norm, ok := normOrigin(origin)
		if !ok {
			return nil, fmt.Errorf("origin %q: want scheme://host[:port], such as http://localhost:3000", origin)
		}
		allowed[norm] = true
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = time.Hour
	}
	limit := MessageCap(g.cfg.Profile)
	h := g.bounded(limit, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{SessionTimeout: o.SessionTimeout}))
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		name, ok := o.Identify(tok)
		if !ok {
			return nil, fmt.Errorf("cordon: this token is not an MCP client's of this gateway: %w", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: name}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	live := &liveSessions{idle: o.SessionTimeout, by: map[string]map[string]time.Time{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !o.AnyOrigin {
			if norm, ok := normOrigin(origin); !ok || !allowed[norm] {
				http.Error(w, fmt.Sprintf("cordon: requests from the web origin %q are refused (allowed: the gateway's own origin, and those given with --allow-origin)", origin), http.StatusForbidden)
				return
			}
		}
		// The scheme in any case, as the SDK's verifier takes it: every
		// session it lets in is counted.
		tok, _ := token.Bearer(r.Header.Get("Authorization"))
		name, ok := o.Identify(tok)
		id := r.Header.Get("Mcp-Session-Id")
		if ok && id == "" && r.Method == http.MethodPost && !live.room(name) {
			http.Error(w, fmt.Sprintf("cordon: this client has %d sessions open already; end one (DELETE) or let one idle out", maxClientSessions), http.StatusTooManyRequests)
			return
		}
		if ok && id != "" && r.Method == http.MethodDelete {
			// Counted as ended before the answer: a client that ends a
			// session and opens another at once has room for it.
			live.end(name, id)
		}
		if ok && id == "" {
			// A new session is counted before its id reaches the client,
			// which may open another the moment it has it.
			sw := &sessionWriter{ResponseWriter: w}
			sw.note = func() { live.seen(name, sw.Header().Get("Mcp-Session-Id")) }
			w = sw
		}
		authed.ServeHTTP(w, r)
		if sw, isNew := w.(*sessionWriter); isNew {
			sw.noted()
		} else if ok && r.Method != http.MethodDelete {
			live.touch(name, id)
		}
	}), nil
}

// sessionWriter calls note once, when the answer's header is about to be
// sent (or when the handler returned without sending one).
type sessionWriter struct {
	http.ResponseWriter
	note func()
	done bool
}

func (s *sessionWriter) noted() {
	if !s.done {
		s.done = true
		s.note()
	}
}

func (s *sessionWriter) WriteHeader(code int) {
	s.noted()
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionWriter) Write(b []byte) (int, error) {
	s.noted()
	return s.ResponseWriter.Write(b)
}

func (s *sessionWriter) Flush() {
	s.noted()
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *sessionWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// maxClientSessions bounds the sessions a client has open at once.
var maxClientSessions = 64

// liveSessions are the sessions each client has open, with when each was
// last used (the SDK ends a session idle longer than idle).
type liveSessions struct {
	idle time.Duration
	mu   sync.Mutex
	by   map[string]map[string]time.Time // client -> session -> last use
}

// room reports whether the client may open another session.
func (l *liveSessions) room(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for id, at := range l.by[client] {
		if now.Sub(at) > l.idle {
			delete(l.by[client], id)
		}
	}
	return len(l.by[client]) < maxClientSessions
}

func (l *liveSessions) seen(client, id string) {
	if id == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[client] == nil {
		l.by[client] = map[string]time.Time{}
	}
	if _, ok := l.by[client][id]; ok || len(l.by[client]) < maxClientSessions {
		l.by[client][id] = time.Now()
	}
}

// touch notes the use of a session the client opened.
func (l *liveSessions) touch(client, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.by[client][id]; ok {
		l.by[client][id] = time.Now()
	}
}

func (l *liveSessions) end(client, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.by[client], id)
}

// normOrigin is an origin in the form compared: scheme://host[:port],
// lower case; false for anything else (a path, "null").
func normOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// drainBytes is how much of a body over the bound is still read (to hash
// it, and so that the client, still sending, reads the answer); past it
// the connection is closed.
const drainBytes = 256 << 20

// bounded serves h with each request's body bounded by limit (the SDK's
// own bound, MaxRequestBodyBytes, is not used: it ends the session): a larger one
// is answered 413 with a JSON-RPC error (which a client takes as the
// refusal of that one request, not the end of its session), and recorded
// by its size and digest.
func (g *Gateway) bounded(limit int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		var body []byte
		if r.ContentLength <= limit {
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
				return
			}
			if int64(len(body)) <= limit {
				r.Body = io.NopCloser(bytes.NewReader(body))
				h.ServeHTTP(w, r)
				return
			}
		}
		over := &oversized{h: sha256.New()}
		over.write(body)
		n, _ := io.Copy(writerFunc(over.write), io.LimitReader(r.Body, drainBytes))
		if n == drainBytes {
			w.Header().Set("Connection", "close")
		}
		id := json.RawMessage("null")
		if v := over.id.value(); v != nil {
			id = v
		}
		msg := fmt.Sprintf("cordon refused this message: it is %d bytes or more, more than the bound of %d bytes (session.max_argument_bytes of the profile, and %d bytes for the rest of the message); the session goes on", over.n, limit, envelopeBytes)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32600, "message": msg}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write(b)
		g.recordRefused(over, limit, id)
	})
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) {
	f(b)
	return len(b), nil
}
