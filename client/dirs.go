package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

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

// DownloadTar copies the directory at path inside the sandbox to w as a
// tar stream (symlinks as links), and returns what the server counted. An
// archive cut short after it started is an error.
func (c *Client) DownloadTar(ctx context.Context, id, path string, w io.Writer) (api.TarResult, error) {
	resp, err := c.do(ctx, http.MethodGet, sandboxPath(id, "/files/tar?"+url.Values{"path": {path}}.Encode()), nil, "")
	if err != nil {
		return api.TarResult{}, err
	}
	defer resp.Body.Close()
	res := api.TarResult{Path: path}
	if res.ArchiveBytes, err = io.Copy(w, resp.Body); err != nil {
		return res, fmt.Errorf("cordon serve: reading the archive of %s: %w", path, err)
	}
	if msg := resp.Trailer.Get("Cordon-Tar-Error"); msg != "" {
		return res, fmt.Errorf("cordon serve: the archive of %s was cut short: %s", path, msg)
	}
	res.Entries, _ = strconv.ParseInt(resp.Trailer.Get("Cordon-Tar-Entries"), 10, 64)
	res.Bytes, _ = strconv.ParseInt(resp.Trailer.Get("Cordon-Tar-Bytes"), 10, 64)
	return res, nil
}

// UploadTar extracts the tar stream r into the directory at path inside
// the sandbox (which must exist).
func (c *Client) UploadTar(ctx context.Context, id, path string, r io.Reader) (api.TarResult, error) {
	resp, err := c.do(ctx, http.MethodPut, sandboxPath(id, "/files/tar?"+url.Values{"path": {path}}.Encode()), r, "application/x-tar")
	if err != nil {
		return api.TarResult{}, err
	}
	defer resp.Body.Close()
	var res api.TarResult
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res); err != nil {
		return res, fmt.Errorf("cordon serve: reading the answer to an upload into %s: %w", path, err)
	}
	return res, nil
}

// Stat describes the entry at path inside the sandbox, a link not
// followed; a *NotFoundError when there is none.
func (c *Client) Stat(ctx context.Context, id, path string) (api.FileInfo, error) {
	var fi api.FileInfo
	err := c.call(ctx, http.MethodGet, sandboxPath(id, "/files/stat?"+url.Values{"path": {path}}.Encode()), nil, &fi)
	return fi, err
}

// Remove removes the file, link or empty directory at path inside the
// sandbox; with recursive, a directory and everything in it.
func (c *Client) Remove(ctx context.Context, id, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "1")
	}
	return c.call(ctx, http.MethodDelete, sandboxPath(id, "/files?"+q.Encode()), nil, nil)
}

// Rename renames the entry at from to to, inside the sandbox.
func (c *Client) Rename(ctx context.Context, id, from, to string) error {
	return c.call(ctx, http.MethodPost, sandboxPath(id, "/files/rename?"+url.Values{"path": {from}, "to": {to}}.Encode()), nil, nil)
}

// MakeDir makes the directory at path inside the sandbox, with its
// parents, and reports whether it made it (false: it was there).
func (c *Client) MakeDir(ctx context.Context, id, path string) (bool, error) {
	var a struct {
		Created bool `json:"created"`
	}
	err := c.call(ctx, http.MethodPost, sandboxPath(id, "/files/mkdir?"+url.Values{"path": {path}}.Encode()), nil, &a)
	return a.Created, err
}
