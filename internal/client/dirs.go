package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/cordon-sandbox/cordon/internal/api"
)

// ListDir lists the directory at path inside the sandbox: at most max
// entries (0: the server's default), with Truncated set when there were
// more.
func (c *Client) ListDir(ctx context.Context, id, path string, max int) (api.DirListing, error) {
	q := url.Values{"path": {path}}
	if max > 0 {
		q.Set("max", fmt.Sprint(max))
	}
	var l api.DirListing
	err := c.call(ctx, http.MethodGet, sandboxPath(id, "/files/list?"+q.Encode()), nil, &l)
	return l, err
}
