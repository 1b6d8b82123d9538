package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
)

// PortURL is the URL at which the server forwards path to 127.0.0.1:port
// inside the sandbox (send the token with it, as Port does).
func (c *Client) PortURL(id string, port int, path string) string {
	return c.base + sandboxPath(id, fmt.Sprintf("/ports/%d/", port)) + strings.TrimPrefix(path, "/")
}

// Port sends a request to 127.0.0.1:port inside the sandbox, through the
// server, and returns the answer of the sandbox's server, whatever its
// status; an error is the cordon server's own refusal (no sandbox, nothing
// listening, too many connections). The caller closes the body.
func (c *Client) Port(ctx context.Context, id string, port int, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.PortURL(id, port, path), body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	// The cordon server's own answers are JSON errors without the
	// forwarded answers' Content-Security-Policy.
	if resp.Header.Get("Content-Security-Policy") == "" && resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, answerError(resp.StatusCode, strings.TrimSpace(string(b)), "", "", 0)
	}
	return resp, nil
}

// SignedPortURL asks the server for a port URL: a URL that opens port of
// the sandbox to whoever has it (a browser, which sends no token), until
// the time it returns (ttl 0: the server's default, 15m; at most 1h).
func (c *Client) SignedPortURL(ctx context.Context, id string, port int, ttl time.Duration) (string, time.Time, error) {
	req := api.PortURLRequest{Port: port}
	if ttl > 0 {
		req.ExpiresIn = ttl.String()
	}
	var u api.PortURL
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/port-urls"), req, &u); err != nil {
		return "", time.Time{}, err
	}
	return c.base + u.Path, u.Expires, nil
}
