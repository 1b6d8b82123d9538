// Package client is the Go client of cordon serve's HTTP API
// (internal/server/openapi.yaml, docs/SERVER.md).
//
// A Sandbox is shaped like the hosted sandboxes' SDKs (E2B's): create
// one, run commands in it with their output streamed (Commands.Run), move
// files in and out (Files.Read, Write, List), keep it alive, kill it. A
// command that does not end with status ok is an error carrying its
// result: a *CommandExitError, or a *LimitError when a limit ended it.
// Every error of the client is a *CordonError, typed by the server's
// status (*NotFoundError, *SandboxEndedError, ...): the SDKs' one
// vocabulary, docs/SDK.md.
//
//	c := client.New("http://127.0.0.1:8700", token)
//	sb, err := c.CreateSandbox(ctx, "")
//	defer sb.Kill(ctx)
//	res, err := sb.Commands.Run(ctx, "make test", &client.RunOptions{Stdout: os.Stdout})
//
// Client also speaks the API call by call (Create, Exec, Run, Upload,
// Download, ListDir, the tar and port forwarding, terminals) and, with an
// admin's token, lists every sandbox, decides approvals and reads the
// audit log. Its wire types are named in this package (SandboxInfo,
// ExecRequest, Outcome, ...).
package client

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// Client talks to one cordon serve.
type Client struct {
	base  string
	token string
	// HTTP is the client requests go through; nil is a default one.
	HTTP *http.Client
	// Retry is what is done with a request refused with 429 (Too Many
	// Requests: nothing was done); New sets DefaultRetryPolicy.
	Retry RetryPolicy
}

// DefaultURL is the server a client talks to when neither its caller nor
// $CORDON_URL names one: cordon serve's default address.
const DefaultURL = "http://127.0.0.1:8700"

// New returns a client of the server at base (http://HOST:PORT; "" is
// $CORDON_URL, else DefaultURL) with token ("" is $CORDON_TOKEN).
func New(base, token string) *Client {
	if base == "" {
		base = cmp.Or(os.Getenv("CORDON_URL"), DefaultURL)
	}
	if token == "" {
		token = os.Getenv("CORDON_TOKEN")
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, HTTP: &http.Client{}, Retry: DefaultRetryPolicy}
}

// RetryPolicy is what a client does with a request refused with 429 (a
// rate, or a cap on commands at once: nothing was done): it sends it
// again, at most MaxRetries times, each after the wait the server's
// Retry-After asks for (1s when it says none, at most 10s), as long as
// the waits add up to at most MaxWait. OnRetry, when set, is called
// before each wait with the 429's error. Past that, the answer is a
// *RateLimitError. The zero policy sends nothing again.
type RetryPolicy struct {
	MaxRetries int
	MaxWait    time.Duration
	OnRetry    func(attempt int, wait time.Duration, err error)
}

// DefaultRetryPolicy is the policy of New: 3 retries within 30s.
var DefaultRetryPolicy = RetryPolicy{MaxRetries: 3, MaxWait: 30 * time.Second}

// do sends a request and returns the response when it succeeded; otherwise
// the server's error.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	var waited time.Duration
	for try := 0; ; try++ {
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 300 {
			return resp, nil
		}
		wait := retryAfter(resp.Header.Get("Retry-After"))
		aerr := answerOf(resp, wait)
		p := c.Retry
		if resp.StatusCode != http.StatusTooManyRequests || try >= p.MaxRetries || waited+wait > p.MaxWait || (body != nil && req.GetBody == nil) {
			var rl *RateLimitError
			if try > 0 && errors.As(aerr, &rl) {
				rl.Message += fmt.Sprintf(" (sent %d times over %v)", try+1, waited)
			}
			return nil, aerr
		}
		// Refused before anything was done (a rate, a cap on commands
		// running at once): sent again once the server says, as the
		// policy allows.
		if p.OnRetry != nil {
			p.OnRetry(try+1, wait, aerr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		waited += wait
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// answerOf reads the error of a response that is not a success, and
// closes it.
func answerOf(resp *http.Response, retryAfter time.Duration) error {
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}()
	var e api.Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		retryAfter = 0
	}
	return answerError(resp.StatusCode, e.Error, e.Sandbox, e.Approval, retryAfter)
}

// maxWait bounds one wait for a retry.
const maxWait = 10 * time.Second

// retryAfter is the wait a Retry-After header (seconds) asks for: 1s
// when it says nothing usable, at most maxWait.
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n < 1 {
		return time.Second
	}
	return min(time.Duration(n)*time.Second, maxWait)
}

// call sends in as JSON (when not nil) and decodes the answer into out
// (when not nil).
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	// Read to the end, so that the connection is kept for the next call.
	defer func() {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("cordon serve: reading the answer to %s %s: %w", method, path, err)
	}
	return nil
}

func sandboxPath(id string, rest ...string) string {
	return api.Version + "/sandboxes/" + url.PathEscape(id) + strings.Join(rest, "")
}

// Health asks whether the server is up.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.call(ctx, http.MethodGet, api.Version+"/health", nil, &h)
	return h, err
}

// Create claims a sandbox of agent ("" is the token's own).
func (c *Client) Create(ctx context.Context, agent string) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, http.MethodPost, api.Version+"/sandboxes", api.CreateRequest{Agent: agent}, &sb)
	return sb, err
}

// CreateWith claims a sandbox as req says: its agent, the environment of
// its commands, its timeout, and a first command.
func (c *Client) CreateWith(ctx context.Context, req api.CreateRequest) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, http.MethodPost, api.Version+"/sandboxes", req, &sb)
	return sb, err
}

// CreateAndRun claims a sandbox of the token's agent and runs a first
// command in it, in one round trip; the answer's Result is the command's.
// A first command that could not be run is an error (the server ended the
// sandbox).
func (c *Client) CreateAndRun(ctx context.Context, req api.ExecRequest) (api.Sandbox, error) {
	req.Stream = false
	var sb api.Sandbox
	err := c.call(ctx, http.MethodPost, api.Version+"/sandboxes", api.CreateRequest{Exec: &req}, &sb)
	return sb, err
}

// List returns the sandboxes the token may see.
func (c *Client) List(ctx context.Context) ([]api.Sandbox, error) {
	var out []api.Sandbox
	err := c.call(ctx, http.MethodGet, api.Version+"/sandboxes", nil, &out)
	return out, err
}

// Get describes one sandbox.
func (c *Client) Get(ctx context.Context, id string) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, http.MethodGet, sandboxPath(id), nil, &sb)
	return sb, err
}

// KeepAlive restarts a sandbox's idle timeout.
func (c *Client) KeepAlive(ctx context.Context, id string) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, http.MethodPost, sandboxPath(id, "/keepalive"), nil, &sb)
	return sb, err
}

// Kill ends a sandbox and everything in it.
func (c *Client) Kill(ctx context.Context, id string) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, http.MethodDelete, sandboxPath(id), nil, &sb)
	return sb, err
}

// Exec runs a command in a sandbox, its output streamed to stdout and
// stderr (either may be nil) as it comes, and returns its outcome.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest, stdout, stderr io.Writer) (outcome.Outcome, error) {
	req.Stream = true
	b, err := json.Marshal(req)
	if err != nil {
		return outcome.Outcome{}, err
	}
	resp, err := c.do(ctx, http.MethodPost, sandboxPath(id, "/exec"), bytes.NewReader(b), "application/json")
	if err != nil {
		return outcome.Outcome{}, err
	}
	defer func() {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return outcome.Outcome{}, fmt.Errorf("cordon serve: reading the output: %w", err)
		}
		switch {
		case ev.Outcome != nil:
			return *ev.Outcome, nil
		case ev.Error != "":
			// The command could not be run after all: the error the same
			// request without stream would have had.
			return outcome.Outcome{}, answerError(ev.HTTPStatus, ev.Error, id, "", 0)
		case len(ev.Stdout) > 0 && stdout != nil:
			stdout.Write(ev.Stdout)
		case len(ev.Stderr) > 0 && stderr != nil:
			stderr.Write(ev.Stderr)
		}
	}
	if err := sc.Err(); err != nil {
		return outcome.Outcome{}, fmt.Errorf("cordon serve: reading the output: %w", err)
	}
	return outcome.Outcome{}, errors.New("cordon serve: the output ended without an outcome")
}

// Run is Exec without streaming: the whole output and the outcome at once.
func (c *Client) Run(ctx context.Context, id string, req api.ExecRequest) (api.ExecResult, error) {
	req.Stream = false
	var res api.ExecResult
	err := c.call(ctx, http.MethodPost, sandboxPath(id, "/exec"), req, &res)
	return res, err
}

// Upload writes r to the file at path inside the sandbox, created with mode
// (0 is 0644).
func (c *Client) Upload(ctx context.Context, id, path string, r io.Reader, mode uint32) error {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", fmt.Sprintf("%o", mode))
	}
	resp, err := c.do(ctx, http.MethodPut, sandboxPath(id, "/files?"+q.Encode()), r, "application/octet-stream")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// Download copies the file at path inside the sandbox to w.
func (c *Client) Download(ctx context.Context, id, path string, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, sandboxPath(id, "/files?"+url.Values{"path": {path}}.Encode()), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Approvals lists the pending approval requests (all of them with all).
func (c *Client) Approvals(ctx context.Context, all bool) ([]approvals.Item, error) {
	p := api.Version + "/approvals"
	if all {
		p += "?all=1"
	}
	var out []approvals.Item
	err := c.call(ctx, http.MethodGet, p, nil, &out)
	return out, err
}

// Decide approves or denies an approval request in the token's name.
func (c *Client) Decide(ctx context.Context, id string, approve bool, d api.Decision) (approvals.Item, error) {
	verb := "/deny"
	if approve {
		verb = "/approve"
	}
	var it approvals.Item
	err := c.call(ctx, http.MethodPost, api.Version+"/approvals/"+url.PathEscape(id)+verb, d, &it)
	return it, err
}

// Audit returns the audit records that match q (sandbox, agent, type,
// since, limit), as the log holds them.
func (c *Client) Audit(ctx context.Context, q url.Values) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := c.call(ctx, http.MethodGet, api.Version+"/audit?"+q.Encode(), nil, &out)
	return out, err
}
