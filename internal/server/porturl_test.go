package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// portURLFixture is portFixture's server, with the fixture itself (its
// clock).
func portURLFixture(t *testing.T, h *hostileHTTP) (*fixture, string, string) {
	t.Helper()
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			return &portBox{fakeBox: &fakeBox{id: id, done: make(chan struct{})}, addr: h.ln.Addr().String()}, nil
		}
	})
	ts := httptest.NewServer(f.srv.Handler())
	t.Cleanup(ts.Close)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return f, ts.URL, sb.ID
}

func issue(t *testing.T, base, id, token string, req api.PortURLRequest) (int, api.PortURL) {
	t.Helper()
	b, _ := json.Marshal(req)
	r, _ := http.NewRequest("POST", base+"/v1/sandboxes/"+id+"/port-urls", strings.NewReader(string(b)))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u api.PortURL
	json.NewDecoder(resp.Body).Decode(&u)
	return resp.StatusCode, u
}

func open(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A port URL opens its sandbox's port without a token, for its time; it
// cannot be altered to reach another port or sandbox, outlives neither
// its expiry nor its sandbox, and is no good to another server process.
func TestPortURL(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f, base, id := portURLFixture(t, h)
	status, u := issue(t, base, id, f.tokens["alice-a"], api.PortURLRequest{Port: 8000, ExpiresIn: "10m"})
	if status != http.StatusOK || !strings.HasPrefix(u.Path, "/v1/p/") || !strings.HasSuffix(u.Path, "/") || !u.Expires.Equal(f.now.Load().Add(10*time.Minute)) {
		t.Fatalf("issuing: %d %+v", status, u)
	}
	resp, body := open(t, base+u.Path+"app/x?q=1")
	if resp.StatusCode != http.StatusOK || body != "ok" || resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("Content-Security-Policy") != forwardCSP {
		t.Fatalf("through the port URL: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	h.mu.Lock()
	head := h.heads[len(h.heads)-1]
	h.mu.Unlock()
	capability := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/v1/p/"), "/")
	if !strings.HasPrefix(head, "GET /app/x?q=1 HTTP/1.1\r\n") || strings.Contains(head, capability) {
		t.Errorf("the sandbox's server saw:\n%s", head)
	}

	// Altered: another port, another sandbox, a later expiry, re-encoded
	// without the key.
	payload, sig, _ := strings.Cut(capability, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	var g portGrant
	json.Unmarshal(raw, &g)
	for _, alter := range []func(*portGrant){
		func(g *portGrant) { g.Port = 22 },
		func(g *portGrant) { g.Sandbox = "sb-0000000000000000" },
		func(g *portGrant) { g.Expires += 3600 },
		func(g *portGrant) { g.Token = "bob-b" },
	} {
		a := g
		alter(&a)
		b, _ := json.Marshal(a)
		forged := base64.RawURLEncoding.EncodeToString(b) + "." + sig
		if resp, body := open(t, base+"/v1/p/"+forged+"/"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("an altered capability %+v: %d %s", a, resp.StatusCode, body)
		}
	}
	if resp, _ := open(t, base+"/v1/p/"+capability+"x/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a capability with its signature altered: %d", resp.StatusCode)
	}

	// Another server process's key signs nothing here.
	h2 := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f2, base2, id2 := portURLFixture(t, h2)
	_, u2 := issue(t, base2, id2, f2.tokens["alice-a"], api.PortURLRequest{Port: 8000})
	if resp, _ := open(t, base+u2.Path); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another server's port URL: %d", resp.StatusCode)
	}

	// Who may ask, and for how long.
	if status, _ := issue(t, base, id, f.tokens["bob-b"], api.PortURLRequest{Port: 8000}); status != http.StatusNotFound {
		t.Errorf("another agent's token: %d", status)
	}
	for _, bad := range []api.PortURLRequest{{Port: 0}, {Port: 70000}, {Port: 8000, ExpiresIn: "2h"}, {Port: 8000, ExpiresIn: "x"}} {
		if status, _ := issue(t, base, id, f.tokens["alice-a"], bad); status != http.StatusBadRequest {
			t.Errorf("%+v: %d", bad, status)
		}
	}

	// Expired.
	f.advance(11 * time.Minute)
	if resp, body := open(t, base+u.Path); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Errorf("after its expiry: %d %s", resp.StatusCode, body)
	}
	// The sandbox ended.
	_, u = issue(t, base, id, f.tokens["alice-a"], api.PortURLRequest{Port: 8000})
	if _, err := f.client("alice-a").Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if resp, _ := open(t, base+u.Path); resp.StatusCode != http.StatusGone {
		t.Errorf("after its sandbox ended: %d", resp.StatusCode)
	}
}
