package cli

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/token"
)

// approvalsPage is the approvals page of a store with one pending
// request (approvers restricts who may decide it), and the tokens of
// alice and bob.
func approvalsPage(t *testing.T, approvers ...string) (srv *httptest.Server, store *approvals.Store, id, alice, bob string) {
	t.Helper()
	dir := t.TempDir()
	store, err := approvals.Open(filepath.Join(dir, "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err = store.Add(approvals.Request{Expires: time.Now().Add(time.Hour), Tool: "pay", Args: json.RawMessage(`{"amount":1}`), Approvers: approvers})
	if err != nil {
		t.Fatal(err)
	}
	alice, aliceSum := token.New()
	bob, bobSum := token.New()
	srv = httptest.NewUnstartedServer(nil)
	a := newApproverAuth([]config.Token{{Name: "alice", SHA256: aliceSum}, {Name: "bob", SHA256: bobSum}}, srv.Listener.Addr().String())
	srv.Config.Handler = approvalsHandler(store, log, a)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, store, id, alice, bob
}

// browser is a client that keeps cookies and does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func postForm(t *testing.T, c *http.Client, u, origin string, form url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// signInAs signs the browser in with tok and returns the page's CSRF token.
func signInAs(t *testing.T, c *http.Client, srv *httptest.Server, tok string) string {
	t.Helper()
	res := postForm(t, c, srv.URL+"/login", "", url.Values{"token": {tok}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	res, err := c.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	m := csrfField.FindStringSubmatch(b.String())
	if res.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the page after signing in: %d %q", res.StatusCode, b.String())
	}
	return m[1]
}

// The page is only for signed-in approvers; signing in takes an
// approver's token and sets a cookie scripts cannot read and other sites
// cannot send.
func TestApprovalsPageSignIn(t *testing.T) {
	srv, _, _, alice, _ := approvalsPage(t)
	c := browser(t)
	if res, _ := c.Get(srv.URL + "/"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Errorf("the page without signing in: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	for _, tok := range []string{"", "alice", alice[:len(alice)-1], token.Hash(alice)} {
		if res := postForm(t, c, srv.URL+"/login", "", url.Values{"token": {tok}}); res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
			t.Errorf("sign in with %q: %d, cookies %v", tok, res.StatusCode, res.Cookies())
		}
	}
	if res := postForm(t, c, srv.URL+"/login", "http://evil.example", url.Values{"token": {alice}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign in from another origin: %d", res.StatusCode)
	}
	res := postForm(t, c, srv.URL+"/login", srv.URL, url.Values{"token": {alice}})
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("sign in: %d %v", res.StatusCode, res.Cookies())
	}
	ck := res.Cookies()[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value == "" || strings.Contains(ck.Value, alice) {
		t.Errorf("the cookie: %+v", ck)
	}
	// The token in the URL, as the page once took it, is no sign-in.
	if res, _ := browser(t).Get(srv.URL + "/?token=" + alice); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a token in the URL: %d", res.StatusCode)
	}
}

// A decision on the page is in the name of the signed-in approver,
// whatever name the form carries, and only with the session's CSRF token,
// from the page's own origin.
func TestApprovalsPageDecidesAsTheSignedIn(t *testing.T) {
	srv, store, id, alice, _ := approvalsPage(t)
	c := browser(t)
	csrf := signInAs(t, c, srv, alice)
	form := func(csrf string) url.Values {
		return url.Values{"id": {id}, "decision": {"approve"}, "by": {"mallory"}, "reason": {"ok"}, "csrf": {csrf}}
	}
	for _, bad := range []struct {
		c      *http.Client
		origin string
		csrf   string
		want   int
	}{
		{c, "", "", http.StatusForbidden},
		{c, "", strings.Repeat("0", 64), http.StatusForbidden},
		{c, "http://evil.example", csrf, http.StatusForbidden},
		{browser(t), "", csrf, http.StatusUnauthorized},
	} {
		if res := postForm(t, bad.c, srv.URL+"/decide", bad.origin, form(bad.csrf)); res.StatusCode != bad.want {
			t.Errorf("origin %q, csrf %q: %d, want %d", bad.origin, bad.csrf, res.StatusCode, bad.want)
		}
	}
	if it, _ := store.Get(id); it.State != approvals.Pending {
		t.Fatalf("decided by a refused form: %+v", it)
	}
	if res := postForm(t, c, srv.URL+"/decide", srv.URL, form(csrf)); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", res.StatusCode)
	}
	if it, _ := store.Get(id); it.State != approvals.Approved || it.By != "alice" {
		t.Errorf("decided: %s by %q, want approved by alice", it.State, it.By)
	}
	// Signed out, the cookie decides nothing.
	postForm(t, c, srv.URL+"/logout", "", url.Values{"csrf": {csrf}})
	if res, _ := c.Get(srv.URL + "/"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the page after signing out: %d", res.StatusCode)
	}
}

// The API decides in the name of the bearer token, takes no typed name,
// and a profile's approvers check that name.
func TestApprovalsAPIDecidesAsTheToken(t *testing.T) {
	srv, store, id, alice, bob := approvalsPage(t, "alice")
	api := func(tok, body string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/api/approvals/"+id+"/approve", strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		tok, body string
		want      int
	}{
		{"", `{"reason": "x"}`, http.StatusUnauthorized},
		{"alice", `{"reason": "x"}`, http.StatusUnauthorized},
		{alice, `{"by": "alice", "reason": "x"}`, http.StatusBadRequest},
		{bob, `{"reason": "x"}`, http.StatusConflict}, // not an approver of the profile
	} {
		if got := api(c.tok, c.body); got != c.want {
			t.Errorf("token %.10q, body %s: %d, want %d", c.tok, c.body, got, c.want)
		}
	}
	if it, _ := store.Get(id); it.State != approvals.Pending {
		t.Fatalf("decided by a refused request: %+v", it)
	}
	if got := api(alice, `{"reason": "fine"}`); got != http.StatusOK {
		t.Fatalf("alice: %d", got)
	}
	if it, _ := store.Get(id); it.State != approvals.Approved || it.By != "alice" {
		t.Errorf("decided: %s by %q", it.State, it.By)
	}
}
