package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
)

// A port URL lets a browser, which cannot send an Authorization header,
// open one forwarded port of one sandbox for a while: the path
// /v1/p/CAPABILITY/..., where the capability names the sandbox, the port,
// when it expires and the token it acts for, signed with a key this
// server process holds. Used, it is that token's request to that port, as
// the ports route would make it, and nothing else: no other port, no
// other route, not after it expires, nor once the token is gone from the
// configuration or the sandbox has ended.
const (
	portURLDefault = 15 * time.Minute
	portURLMax     = time.Hour
)

// portGrant is what a port URL's capability says.
type portGrant struct {
	Sandbox string `json:"s"`
	Port    int    `json:"p"`
	Expires int64  `json:"e"` // unix seconds
	Token   string `json:"t"`
}

// redactCapability is a path with a port URL's capability replaced by
// the start of its SHA-256, as the audit log records it: a record is no
// credential.
func redactCapability(path string) string {
	rest, ok := strings.CutPrefix(path, api.Version+"/p/")
	if !ok {
		return path
	}
	capability, tail, _ := strings.Cut(rest, "/")
	sum := sha256.Sum256([]byte(capability))
	return api.Version + "/p/capability-sha256:" + hex.EncodeToString(sum[:8]) + "/" + tail
}

// signGrant is the capability of g: its JSON and the HMAC-SHA256 of it,
// each base64url.
func signGrant(key []byte, g portGrant) string {
	b, _ := json.Marshal(g)
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openGrant verifies a capability and returns what it grants.
func openGrant(key []byte, capability string, now time.Time) (portGrant, error) {
	var g portGrant
	body, sig, ok := strings.Cut(capability, ".")
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || len(b) > 1024 {
		return g, errors.New("the port URL is malformed")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return g, errors.New("the port URL's signature does not verify (it was altered, or made by another server process)")
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, errors.New("the port URL is malformed")
	}
	if now.Unix() >= g.Expires {
		return g, fmt.Errorf("the port URL expired at %s", time.Unix(g.Expires, 0).UTC().Format(time.RFC3339))
	}
	return g, nil
}

// portURLRoutes are the issuing of port URLs and their use.
func (s *Server) portURLRoutes() {
	s.handle("POST "+api.Version+"/sandboxes/{id}/port-urls", anyToken, s.issuePortURL)
	s.handle(api.Version+"/p/{capability}/{path...}", public, s.signedForward)
}

// issuePortURL makes a port URL for a port of a sandbox the caller may
// forward to: {"port": N, "expires_in": "15m"} (at most an hour, and not
// past the sandbox's end).
func (s *Server) issuePortURL(w http.ResponseWriter, r *http.Request, c caller) int {
	var req api.PortURLRequest
	if err := decode(r, w, 4<<10, &req); err != nil {
		return fail(w, bodyStatus(err), "%v", err)
	}
	if req.Port < 1 || req.Port > 65535 {
		return fail(w, http.StatusBadRequest, "port: want 1 to 65535, found %d", req.Port)
	}
	ttl := portURLDefault
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d < time.Second || d > portURLMax {
			return fail(w, http.StatusBadRequest, "expires_in: want a duration from 1s to %v, found %q", portURLMax, req.ExpiresIn)
		}
		ttl = d
	}
	e, status := s.live(w, r, c)
	if e == nil {
		return status
	}
	now := s.opts.Now()
	expires := now.Add(ttl)
	e.mu.Lock()
	if end := e.expires(); end.Before(expires) {
		expires = end
	}
	e.mu.Unlock()
	g := portGrant{Sandbox: e.id, Port: req.Port, Expires: expires.Unix(), Token: c.token.Name}
	s.record(e.id, c, audit.Decision, "port_url", map[string]any{"port": req.Port, "expires": expires.UTC(), "token": c.name()})
	return reply(w, http.StatusOK, api.PortURL{Path: api.Version + "/p/" + signGrant(s.portKey[:], g) + "/", Expires: expires.UTC()})
}

// signedForward is a request through a port URL: forward's, for the
// token and the sandbox's port the URL grants.
func (s *Server) signedForward(w http.ResponseWriter, r *http.Request, _ caller) int {
	g, err := openGrant(s.portKey[:], r.PathValue("capability"), s.opts.Now())
	if err != nil {
		return fail(w, http.StatusUnauthorized, "%v", err)
	}
	var tok *Token
	for _, t := range s.opts.Config.Tokens {
		if t.Name == g.Token {
			tok = t
		}
	}
	if tok == nil {
		return fail(w, http.StatusUnauthorized, "the port URL's token %s is no longer configured", g.Token)
	}
	c := caller{token: tok, viaURL: true}
	// The token's rate, as its own requests: a URL handed to many
	// addresses multiplies nothing.
	if status := s.admit(w, r, c); status != 0 {
		return status
	}
	if !s.enter() {
		return refuseDraining(w)
	}
	defer s.leave()
	// Not past its expiry either: a WebSocket or a streamed answer
	// opened through it ends then.
	ctx, cancel := context.WithTimeout(r.Context(), time.Unix(g.Expires, 0).Sub(s.opts.Now()))
	defer cancel()
	r = r.WithContext(ctx)
	r.SetPathValue("id", g.Sandbox)
	r.SetPathValue("port", fmt.Sprint(g.Port))
	return s.forward(w, r, c)
}
