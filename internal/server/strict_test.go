package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// do sends a request with the token named (and its Authorization header
// as auth says, %s the token) and returns the status and the body.
func (f *fixture) do(t *testing.T, method, path, auth, token, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", strings.ReplaceAll(auth, "%s", f.tokens[token]))
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// countingFixture is a fixture that counts the commands its sandboxes
// ran.
func countingFixture(t *testing.T) (*fixture, *atomic.Int64) {
	var ran atomic.Int64
	f := newFixture(t, 0, nil, func([]string) outcome.Outcome {
		ran.Add(1)
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}
	})
	return f, &ran
}

// A body is one JSON value, with no key twice and every key spelled as
// its field: anything else is refused, naming the key, and runs nothing.
func TestStrictBodies(t *testing.T) {
	f, ran := countingFixture(t)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	exec := "/v1/sandboxes/" + sb.ID + "/exec"
	for _, tc := range []struct {
		path, body, want string
	}{
		{exec, `{"args":["true"]} x`, "data after the JSON value"},
		{exec, `{"args":["true"]}{"args":["sh"]}`, "data after the JSON value"},
		{exec, `{"args":["true"],"args":["sh"]}`, `the key "args" is given twice`},
		{exec, `{"args":["true"],"ARGS":["sh"]}`, `the key "ARGS" is not "args"`},
		{exec, `{"Args":["sh"]}`, `the key "Args" is not "args"`},
		{exec, `{"args":["true"],"env":{"A":"1","A":"2"}}`, `$.env: the key "A" is given twice`},
		{exec, `{"args":["true"],"what":1}`, `unknown key "what"`},
		{exec, `{"\u0061rgs":["sh"],"args":["true"]}`, `the key "args" is given twice`},
		{exec, `{"args":["true"],"\u0041RGS":["sh"]}`, `the key "ARGS" is not "args"`},
		{exec, `{"args":["true"],"env":{"a\"b":"1","a\"b":"2"}}`, `the key "a\"b" is given twice`},
		{exec, `{"args":["true"]`, `unexpected EOF`},
		{exec, `{"args":["true"],"env":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`, `nested deeper than 64`},
		{"/v1/sandboxes", `{"exec":{"args":["true"],"Stdin":"eA=="}}`, `$.exec: the key "Stdin" is not "stdin"`},
		{"/v1/sandboxes", `{"exec":{"args":["true"],"dir":"/a","dir":"/b"}}`, `$.exec: the key "dir" is given twice`},
	} {
		resp, body := f.do(t, "POST", tc.path, "Bearer %s", "alice-a", tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(errorOf(body), tc.want) {
			t.Errorf("%s %s: %d %s, want 400 saying %s", tc.path, tc.body, resp.StatusCode, body, tc.want)
		}
	}
	if ran.Load() != 0 {
		t.Fatalf("%d commands ran from refused bodies", ran.Load())
	}
	// Variables differing in case are distinct variables.
	if resp, body := f.do(t, "POST", exec, "Bearer %s", "alice-a", `{"args":["true"],"env":{"PATH":"/bin","path":"x"}} `); resp.StatusCode != 200 {
		t.Fatalf("env names differing in case: %d %s", resp.StatusCode, body)
	}
}

// errorOf is the text of an api.Error body.
func errorOf(body string) string {
	var e api.Error
	json.Unmarshal([]byte(body), &e)
	return e.Error
}

// The scheme of the Authorization header is matched in any case.
func TestBearerSchemeAnyCase(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	for auth, want := range map[string]int{
		"Bearer %s": 200, "bearer %s": 200, "BEARER %s": 200, "bEaReR   %s ": 200,
		"Basic %s": 401, "Bearer%s": 401, "%s": 401, "Bearer x%s": 401,
	} {
		if resp, body := f.do(t, "GET", "/v1/sandboxes", auth, "alice-a", ""); resp.StatusCode != want {
			t.Errorf("Authorization: %q: %d %s, want %d", auth, resp.StatusCode, body, want)
		}
	}
}

// Every answer, whatever its kind, says nosniff.
func TestNosniffOnEveryAnswer(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/v1/health", ""},
		{"GET", "/v1/openapi.yaml", ""},
		{"GET", "/v1/sandboxes", ""},        // 401
		{"GET", "/v1/sandboxes", "alice-a"}, // JSON
		{"GET", "/v1/nothing", "alice-a"},   // 404
		{"GET", "/metrics", "ops"},          // text
		{"GET", "/", ""},                    // the page
		{"GET", "/v1/../v1/health", ""},     // the mux's redirect
		{"POST", "/v1/sandboxes", "ops"},    // 403
	} {
		resp, _ := f.do(t, tc.method, tc.path, "Bearer %s", tc.token, "")
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q", tc.method, tc.path, resp.StatusCode, got)
		}
	}
}

// A command over the caps of argv, env or dir is refused with 413 before
// anything is recorded of it or run.
func TestOversizedCommandsRefusedUnrecorded(t *testing.T) {
	f, ran := countingFixture(t)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	exec := "/v1/sandboxes/" + sb.ID + "/exec"
	huge := strings.Repeat("a", 10<<20)
	big := strings.Repeat("b", 100<<10)
	for name, body := range map[string]string{
		"a 10 MB argument":      `{"args":["echo","` + huge + `"]}`,
		"args over 1 MiB":       `{"args":["echo"` + strings.Repeat(`,"`+big+`"`, 11) + `]}`,
		"too many arguments":    `{"args":["true"` + strings.Repeat(`,""`, maxArgs) + `]}`,
		"a 10 MB variable":      `{"args":["true"],"env":{"A":"` + huge + `"}}`,
		"a long directory":      `{"args":["true"],"dir":"/` + strings.Repeat("d", maxDirBytes) + `"}`,
		"create's first, large": `{"exec":{"args":["echo","` + huge + `"]}}`,
	} {
		before, err := os.Stat(f.log)
		if err != nil {
			t.Fatal(err)
		}
		path := exec
		if strings.HasPrefix(name, "create") {
			path = "/v1/sandboxes"
		}
		resp, answer := f.do(t, "POST", path, "Bearer %s", "alice-a", body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(answer, "over the cap") {
			t.Errorf("%s: %d %.300s", name, resp.StatusCode, answer)
		}
		if err := f.srv.opts.Audit.Flush(); err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(f.log)
		if grew := after.Size() - before.Size(); grew > 4<<10 {
			t.Errorf("%s: the audit log grew by %d bytes", name, grew)
		}
	}
	if ran.Load() != 0 {
		t.Fatalf("%d oversized commands ran", ran.Load())
	}
}

// A write the file size limit stopped (EFBIG) answers 413, as any
// upload over it.
func TestFileStatusTooLarge(t *testing.T) {
	code := fileTooLarge
	if got := fileStatus(outcome.Outcome{Status: outcome.ExitNonzero, CommandExitCode: &code}); got != http.StatusRequestEntityTooLarge {
		t.Fatalf("EFBIG: %d", got)
	}
}

// The strict check never panics, and agrees with encoding/json on what is
// JSON.
func FuzzCheckStrict(f *testing.F) {
	for _, seed := range []string{`{"args":["a","b"],"env":{"A":"1"},"dir":"/","stdin":"eA==","stream":true}`, `{"exec":{"args":[]}}`, `[1,{"a":[{}]}]`, `"x"`, `null`, ` {"a" : [ 1 , 2.5e3 , true , null ] } `, `{"\u0041":"\\\""}`, `{}{}`, `{"a":1,}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		err := checkStrict([]byte(body), reflect.TypeOf(&api.CreateRequest{}))
		if err == nil && !json.Valid([]byte(body)) {
			t.Fatalf("%q is not JSON, and was taken", body)
		}
	})
}

// A client that sends its whole body before it reads the answer gets the
// 413 of a body over the bound, not a connection reset: the server reads
// what is left (to a bound) before it answers, then closes.
func TestOversizedBodyIsAnsweredToASenderThatDoesNotRead(t *testing.T) {
	f := newFixture(t, 1, nil, nil)
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(f.url)
	for _, announce := range []bool{true, false} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"args":["cat"],"stdin":"` + strings.Repeat("eHh4", (12<<20)/4) + `"}`
		head := "POST /v1/sandboxes/" + sb.ID + "/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + f.tokens["alice-a"] + "\r\nContent-Type: application/json\r\n"
		if announce {
			head += fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
		} else {
			head += "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", len(body))
			body += "\r\n0\r\n\r\n"
		}
		conn.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(conn, head+body); err != nil {
			t.Fatalf("sending the whole body (Content-Length %v): %v", announce, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the answer (Content-Length %v): %v", announce, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
			t.Errorf("Content-Length %v: %d, close %v: %s", announce, resp.StatusCode, resp.Close, msg)
		}
		conn.Close()
	}
}
