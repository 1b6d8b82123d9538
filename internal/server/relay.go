package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// The headers of a request one node forwards to another: which node
// forwarded it, for which client address, the Host the client sent it to,
// when, and the signature over them and the request (see signForward).
const (
	forwardedBy   = "Cordon-Forwarded-By"
	forwardedFor  = "Cordon-Forwarded-For"
	forwardedHost = "Cordon-Forwarded-Host"
	forwardedAt   = "Cordon-Forwarded-At"
	forwardedSig  = "Cordon-Forwarded-Sig"
)

// forwardHeaders are the forwarding headers, which a client never sets
// and a sandbox never sees.
var forwardHeaders = []string{forwardedBy, forwardedFor, forwardedHost, forwardedAt, forwardedSig}

// forwardSkew is how far a forwarded request's time may be from the
// receiving node's clock.
const forwardSkew = time.Minute

// relay forwards requests to the node that holds their sandbox, or to
// the node a new sandbox is placed on.
type relay struct {
	s     *Server
	proxy *httputil.ReverseProxy
	// pending counts the creates this node forwarded to each node and
	// that have not been answered: placement counts them against the
	// node's room, which its heartbeat does not show yet.
	mu      sync.Mutex
	pending map[string]int
}

// relayTarget is where a request goes, in its context.
type relayTarget struct {
	node  string
	url   *url.URL
	via   string // this node
	who   string // the client's address
	reply *int   // the status the node answered
}

type relayKey struct{}

func newRelay(s *Server) *relay {
	rl := &relay{s: s, pending: map[string]int{}}
	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment between nodes
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	rl.proxy = &httputil.ReverseProxy{
		Transport:     transport,
		FlushInterval: -1, // streamed output reaches the client as it comes
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(relayKey{}).(*relayTarget)
			pr.SetURL(t.url)
			pr.Out.Host = t.url.Host
			for _, h := range forwardHeaders {
				pr.Out.Header.Del(h)
			}
			signForward(s.opts.Config.Cluster.secret, pr.Out.Header, t.via, t.who, pr.In.Host, pr.In.Method, pr.In.URL.RequestURI(), time.Now())
		},
		ModifyResponse: func(resp *http.Response) error {
			t := resp.Request.Context().Value(relayKey{}).(*relayTarget)
			*t.reply = resp.StatusCode
			resp.Header.Set("Cordon-Node", t.node)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t := r.Context().Value(relayKey{}).(*relayTarget)
			if errors.Is(r.Context().Err(), context.Canceled) {
				*t.reply = 499 // the client went away
				return
			}
			*t.reply = fail(w, http.StatusBadGateway, "node %s, which holds the sandbox, did not answer: %v", t.node, err)
		},
	}
	return rl
}

// forward sends the request to node and returns the status it answered,
// and whether the answer broke off half sent (the client or the node went
// away): the caller records the request, then aborts the connection.
func (rl *relay) forward(w http.ResponseWriter, r *http.Request, node statedb.Node) (int, bool) {
	what := "sandbox"
	if r.PathValue("id") == "" {
		what = "create"
		defer rl.placed(node.Name) // place counted it
	}
	u, err := url.Parse(node.Advertise)
	if err != nil {
		return fail(w, http.StatusBadGateway, "node %s advertises %q: %v", node.Name, node.Advertise, err), false
	}
	rl.s.metrics.add(1, "cordon_requests_forwarded_total", "node", node.Name, "what", what)
	status := 0
	t := &relayTarget{node: node.Name, url: u, via: rl.s.opts.Node, who: r.RemoteAddr, reply: &status}
	_, aborted := serveAborting(func() int {
		rl.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), relayKey{}, t)))
		return 0
	})
	return status, aborted
}

// signForward sets the headers of a forwarded request: this node, the
// client's address, the Host it sent the request to, the time and an
// HMAC-SHA256 over them, the method, the URL and the request's
// Authorization header (a signature is good for this request of this
// caller only).
func signForward(secret []byte, h http.Header, via, who, host, method, uri string, now time.Time) {
	at := strconv.FormatInt(now.Unix(), 10)
	h.Set(forwardedBy, via)
	h.Set(forwardedFor, who)
	h.Set(forwardedHost, host)
	h.Set(forwardedAt, at)
	h.Set(forwardedSig, forwardMAC(secret, via, who, host, at, method, uri, h.Get("Authorization")))
}

func forwardMAC(secret []byte, via, who, host, at, method, uri, auth string) string {
	sum := sha256.Sum256([]byte(auth))
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{"cordon-forward-v2", via, who, host, at, method, uri, hex.EncodeToString(sum[:])} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// forwardedFrom checks the forwarding headers of a request: none (""),
// or a good signature (the forwarding node, the client's address and the
// Host the client sent the request to), or an error that refuses the
// request.
func (s *Server) forwardedFrom(r *http.Request, now time.Time) (via, who, host string, err error) {
	h := r.Header
	via, who, host = h.Get(forwardedBy), h.Get(forwardedFor), h.Get(forwardedHost)
	at, sig := h.Get(forwardedAt), h.Get(forwardedSig)
	if via == "" && who == "" && host == "" && at == "" && sig == "" {
		return "", "", "", nil
	}
	secret := s.opts.Config.Cluster.secret
	if secret == nil {
		return "", "", "", errors.New("this node takes no forwarded requests: it has no cluster secret")
	}
	want := forwardMAC(secret, via, who, host, at, r.Method, r.URL.RequestURI(), h.Get("Authorization"))
	if !hmac.Equal([]byte(sig), []byte(want)) || via == "" {
		return "", "", "", errors.New("the forwarded request's signature does not verify (the nodes' cluster secrets differ, or the request was changed)")
	}
	t, err := strconv.ParseInt(at, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > forwardSkew {
		return "", "", "", fmt.Errorf("the forwarded request was signed at %s, more than %s from this node's clock", at, forwardSkew)
	}
	return via, who, host, nil
}

// owner returns the node that holds sandbox id when it is another live
// node this one can forward to, and the caller may see the sandbox.
func (s *Server) owner(ctx context.Context, id string, c caller) (statedb.Node, bool) {
	s.mu.Lock()
	local := s.entries[id] != nil
	s.mu.Unlock()
	if local || s.advertise() == "" {
		return statedb.Node{}, false
	}
	sess, err := s.opts.DB.SessionByID(ctx, id)
	if err != nil || sess.Node == s.opts.Node || (!c.token.Admin && sess.Agent != c.token.Agent) {
		return statedb.Node{}, false
	}
	var sb api.Sandbox
	if json.Unmarshal(sess.Info, &sb) != nil || sb.State == "ended" {
		return statedb.Node{}, false
	}
	n, err := s.opts.DB.NodeByName(ctx, sess.Node)
	if err != nil || n.Advertise == "" || n.Age > s.timeout() || (n.State != statedb.NodeAlive && n.State != statedb.NodeDraining) {
		return statedb.Node{}, false
	}
	return n, true
}

// place picks the node a new sandbox of agent goes to: the live node,
// not draining, with the most room for the agent (its max_sandboxes less
// its live sandboxes, by its heartbeat or the sessions, whichever counts
// more, less the creates forwarded to it and not yet answered), this
// node on a tie. It reports false when this node is the
// one, or no other node has room.
func (s *Server) place(ctx context.Context, agent string) (statedb.Node, bool) {
	if s.advertise() == "" {
		return statedb.Node{}, false
	}
	nodes, err := s.opts.DB.Nodes(ctx)
	if err != nil {
		return statedb.Node{}, false // this node decides alone
	}
	// The sessions are recorded before a create is answered: they count
	// what a heartbeat has not said yet.
	live, err := s.opts.DB.LiveByNode(ctx, agent, s.longestLifetime(), s.opts.Now())
	if err != nil {
		return statedb.Node{}, false
	}
	mine := s.load().Agents[agent]
	best, bestRoom := statedb.Node{}, mine.Max-mine.Live
	if s.drainAsked.Load() {
		bestRoom = 0
	}
	rl := s.relay
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for _, n := range nodes {
		if n.Name == s.opts.Node || n.State != statedb.NodeAlive || n.Advertise == "" || n.Age > s.timeout() {
			continue
		}
		l, ok := n.Load.Agents[agent]
		if !ok {
			continue // a node that does not serve the agent
		}
		if room := l.Max - max(l.Live, live[n.Name]) - rl.pending[n.Name]; room > bestRoom {
			best, bestRoom = n, room
		}
	}
	if best.Name == "" {
		return statedb.Node{}, false
	}
	rl.pending[best.Name]++
	return best, true
}

// placed says a create forwarded to node was answered.
func (rl *relay) placed(node string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.pending[node]--; rl.pending[node] <= 0 {
		delete(rl.pending, node)
	}
}

// createPattern is the route of a create, which relayTo places.
const createPattern = "POST " + api.Version + "/sandboxes"

// relayTo says whether the request goes to another node, and which: a
// create placed elsewhere, or a request for a sandbox another node holds.
// A request another node forwarded is never forwarded again.
func (s *Server) relayTo(r *http.Request, pattern string, c caller) (statedb.Node, bool) {
	if c.via != "" || c.token == nil {
		return statedb.Node{}, false
	}
	if pattern == createPattern {
		return s.place(r.Context(), c.token.Agent)
	}
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	if !strings.HasPrefix(pattern, api.Version+"/sandboxes/{id}") {
		return statedb.Node{}, false
	}
	return s.owner(r.Context(), r.PathValue("id"), c)
}

func init() {
	help["cordon_requests_forwarded_total"] = [2]string{"counter", "Requests this node forwarded to another, by node and by what (create: placed there; sandbox: a request for its sandbox)."}
	help["cordon_nodes_declared_dead_total"] = [2]string{"counter", "Nodes this node declared dead (silent past node_timeout), by node."}
}
