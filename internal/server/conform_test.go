package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The conformance check: every answer the server gives in these tests is
// checked against openapi.yaml (its status declared for the operation, its
// content type, its body's schema), by a wrapper of the handler each
// fixture serves (see newFixtureWith).

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

// spec is the router of openapi.yaml's operations.
func spec() (routers.Router, error) {
	specOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", ndjsonDecoder)
		doc, err := openapi3.NewLoader().LoadFromData(openAPI)
		if err != nil {
			specErr = fmt.Errorf("openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			specErr = fmt.Errorf("openapi.yaml: %w", err)
			return
		}
		doc.Servers = nil // any host: the tests' servers listen where they can
		specRouter, specErr = gorillamux.NewRouter(doc)
	})
	return specRouter, specErr
}

// ndjsonDecoder decodes a stream of JSON lines, each checked against the
// schema of one line.
func ndjsonDecoder(body io.Reader, _ http.Header, schema *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 64<<20)
	var last any
	for n := 1; sc.Scan(); n++ {
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if schema != nil && schema.Value != nil {
			if err := schema.Value.VisitJSON(v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
		last = v
	}
	return last, sc.Err()
}

// maxChecked is the most of a body the check keeps; a longer one is
// checked for its status and content type only.
const maxChecked = 256 << 10

// checkAnswer checks one answer against openapi.yaml.
func checkAnswer(req *http.Request, status int, header http.Header, body []byte, whole bool) error {
	if got := header.Get("X-Content-Type-Options"); got != "nosniff" {
		return fmt.Errorf("X-Content-Type-Options is %q", got)
	}
	router, err := spec()
	if err != nil {
		return err
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		// Not an operation of the API: the page, or the catch-all 404.
		if p := req.URL.Path; p == "/" || p == "/favicon.ico" || strings.HasPrefix(p, "/ui/") {
			return nil
		}
		if status == http.StatusNotFound && strings.HasPrefix(header.Get("Content-Type"), "application/json") {
			var e struct{ Error string }
			if json.Unmarshal(body, &e) == nil && e.Error != "" {
				return nil
			}
		}
		if status == http.StatusMovedPermanently || status == http.StatusTemporaryRedirect {
			return nil // the mux cleaning a path
		}
		return fmt.Errorf("no operation of openapi.yaml answers it (%v), and the answer is %d", err, status)
	}
	if anyOperation[status] && route.Operation.Responses.Status(status) == nil {
		// Declared once, in the document's description, for every
		// operation: an Error body.
		var e struct{ Error string }
		if !strings.HasPrefix(header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &e) != nil || e.Error == "" {
			return fmt.Errorf("a %d is answered with an Error body, not %q", status, body)
		}
		return nil
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	if !whole || len(body) == 0 && strings.HasPrefix(header.Get("Content-Type"), "application/x-ndjson") {
		// A stream of no lines (its client left before the first)
		// holds nothing to check.
		opts.ExcludeResponseBody = true
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 status, Header: header, Options: opts,
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// anyOperation are the statuses openapi.yaml's description says any
// operation may answer before its own checks (rates, URL and header
// sizes, connections).
var anyOperation = map[int]bool{http.StatusTooManyRequests: true, http.StatusRequestURITooLong: true, http.StatusRequestHeaderFieldsTooLarge: true, http.StatusServiceUnavailable: true}

// conform wraps h: each answer is checked, and a failure fails the test.
func conform(t testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if err := checkAnswer(r, status, w.Header(), rec.body.Bytes(), !rec.cut); err != nil {
			t.Errorf("%s %s answered %d, not as openapi.yaml says: %v\n%.500s", r.Method, r.URL.Path, status, err, rec.body.String())
		}
	})
}

// recorder keeps an answer's status and (up to maxChecked) its body as
// they pass.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	cut    bool
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(p) <= maxChecked {
		r.body.Write(p)
	} else {
		r.cut = true
	}
	n, err := r.ResponseWriter.Write(p)
	if err != nil {
		r.cut = true // an answer cut short (a client gone) is not checked whole
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack hands the connection over: to a proxy forwarding a WebSocket,
// which writes the 101 on the connection itself.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// The check catches an answer openapi.yaml does not declare: a status,
// a content type, a body off its schema, a stream line off its schema, a
// missing nosniff.
func TestConformanceCheckCatches(t *testing.T) {
	h := func(ct string) http.Header {
		return http.Header{"Content-Type": {ct}, "X-Content-Type-Options": {"nosniff"}}
	}
	health := `{"status":"ok","version":"1","sandboxes":0,"warm":0}`
	sb := `{"id":"sb-1","agent":"a","profile":"default","profile_sha256":"x","created":"2026-01-01T00:00:00Z","warm":false,"state":"running","commands":0,"running":0}`
	for _, c := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"as declared", "GET", "/v1/health", 200, h("application/json"), health, true},
		{"a sandbox as declared", "GET", "/v1/sandboxes/sb-1", 200, h("application/json"), sb, true},
		{"an error as declared", "GET", "/v1/sandboxes/sb-1", 404, h("application/json"), `{"error":"no sandbox sb-1"}`, true},
		{"a stream as declared", "POST", "/v1/sandboxes/sb-1/exec", 200, h("application/x-ndjson"), "{\"stdout\":\"aGk=\"}\n{\"error\":\"gone\"}\n", true},
		{"an undeclared status", "GET", "/v1/health", 418, h("application/json"), `{"error":"teapot"}`, false},
		{"an undeclared status of an operation", "GET", "/v1/sandboxes/sb-1", 409, h("application/json"), `{"error":"x"}`, false},
		{"a body off its schema", "GET", "/v1/health", 200, h("application/json"), `{"status":5}`, false},
		{"a value off its enum", "GET", "/v1/health", 200, h("application/json"), `{"status":"fine"}`, false},
		{"a required field missing", "GET", "/v1/sandboxes/sb-1", 200, h("application/json"), strings.Replace(sb, `"id":"sb-1",`, "", 1), false},
		{"an error off its schema", "GET", "/v1/sandboxes/sb-1", 404, h("application/json"), `{"message":"no"}`, false},
		{"another content type", "GET", "/v1/health", 200, h("text/plain"), health, false},
		{"a stream line off its schema", "POST", "/v1/sandboxes/sb-1/exec", 200, h("application/x-ndjson"), "{\"stdout\":\"aGk=\"}\n{\"outcome\":\"ok\"}\n", false},
		{"no nosniff", "GET", "/v1/health", 200, http.Header{"Content-Type": {"application/json"}}, health, false},
		{"an undocumented path answered 200", "GET", "/v1/secret", 200, h("application/json"), `{}`, false},
	} {
		req, _ := http.NewRequest(c.method, "http://127.0.0.1:1"+c.path, nil)
		err := checkAnswer(req, c.status, c.header, []byte(c.body), true)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
