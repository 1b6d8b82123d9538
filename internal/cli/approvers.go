package cli

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/token"
)

// The approvals page and its API know who is deciding: every approver has
// a token of their own (approvers in cordon's configuration), and a
// decision is taken in the name of the token that made it, never in a
// name typed into a form. The API takes the token in an Authorization
// header; a browser signs in with it once, and then carries a session
// cookie (HttpOnly, SameSite=Strict), and every form it posts carries the
// session's CSRF token and, when the browser names one, the page's own
// origin.

// approverCookie is the cookie of a signed-in browser.
const approverCookie = "cordon_approver"

// Bounds of the signed-in browsers: how many at once (the oldest is
// signed out past it), and for how long.
const (
	maxSignIns = 256
	signInFor  = 12 * time.Hour
)

// signIn is a signed-in browser of an approver.
type signIn struct {
	name    string
	csrf    string
	expires time.Time
}

// approverAuth tells who makes a request to the approvals page.
type approverAuth struct {
	tokens  []config.Token
	origins map[string]bool // the page's own, for the Origin check
	now     func() time.Time

	mu       sync.Mutex
	sessions map[string]*signIn // by cookie
}

func newApproverAuth(tokens []config.Token, addr string) *approverAuth {
	a := &approverAuth{tokens: tokens, origins: map[string]bool{"http://" + addr: true}, now: time.Now, sessions: map[string]*signIn{}}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		a.origins["http://localhost:"+port] = true
	}
	return a
}

// bearer is the approver whose token the Authorization header carries.
func (a *approverAuth) bearer(r *http.Request) (string, bool) {
	tok, ok := token.Bearer(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	return config.Identify(a.tokens, tok)
}

// session is the signed-in browser a request comes from, or nil.
func (a *approverAuth) session(r *http.Request) *signIn {
	c, err := r.Cookie(approverCookie)
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[c.Value]
	if s == nil || a.now().After(s.expires) {
		delete(a.sessions, c.Value)
		return nil
	}
	return s
}

// signIn signs a browser in as the approver whose token it presented, and
// sets its cookie; false for a token that is no approver's.
func (a *approverAuth) signIn(w http.ResponseWriter, tok string) bool {
	name, ok := config.Identify(a.tokens, tok)
	if !ok {
		return false
	}
	now := a.now()
	a.mu.Lock()
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	for len(a.sessions) >= maxSignIns {
		oldest := ""
		for k, s := range a.sessions {
			if oldest == "" || s.expires.Before(a.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(a.sessions, oldest)
	}
	cookie := randomHex(32)
	a.sessions[cookie] = &signIn{name: name, csrf: randomHex(32), expires: now.Add(signInFor)}
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: approverCookie, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: int(signInFor / time.Second)})
	return true
}

// signOut ends the browser's session.
func (a *approverAuth) signOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(approverCookie); err == nil {
		a.mu.Lock()
		delete(a.sessions, c.Value)
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: approverCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// form checks a form a signed-in browser posted: the page's own origin
// (when the browser names one) and the session's CSRF token. It returns
// the session, or writes the refusal and returns nil.
func (a *approverAuth) form(w http.ResponseWriter, r *http.Request) *signIn {
	if !a.sameOrigin(r) {
		http.Error(w, "cordon: a form posted from another origin is refused", http.StatusForbidden)
		return nil
	}
	s := a.session(r)
	if s == nil {
		http.Error(w, "cordon: sign in with your approver token first", http.StatusUnauthorized)
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
		http.Error(w, "cordon: the form lacks this session's CSRF token; reload the page", http.StatusForbidden)
		return nil
	}
	return s
}

// sameOrigin reports whether a request's Origin, if it has one, is the
// page's own.
func (a *approverAuth) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "" || a.origins[strings.ToLower(o)]
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loginName is the name of the user running cordon, in whose name the
// command line decides.
func loginName() (string, error) {
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return "", fmt.Errorf("cannot tell who is deciding: the user running cordon has no login name (%v)", err)
	}
	return u.Username, nil
}
