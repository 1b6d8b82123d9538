package client

import (
	"bufio"
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

// Watch is a watch of a directory inside a sandbox: its changes, one
// api.FileEvent each, as the server streams them.
type Watch struct {
	body   io.ReadCloser
	lines  *bufio.Scanner
	reason string
}

// WatchDir watches the directory at path inside the sandbox (its
// subdirectories too, with recursive) and returns once the watch is in
// place. Cancelling ctx, or Close, stops it.
func (c *Client) WatchDir(ctx context.Context, id, path string, recursive bool) (*Watch, error) {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "1")
	}
	resp, err := c.do(ctx, http.MethodGet, sandboxPath(id, "/files/watch?"+q.Encode()), nil, "")
	if err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 4096), 1<<20)
	return &Watch{body: resp.Body, lines: lines}, nil
}

// Next returns the next change; io.EOF once the watch ended, when
// EndReason says why the server ended it ("" when it was stopped here or
// the connection was lost).
func (w *Watch) Next() (api.FileEvent, error) {
	for w.lines.Scan() {
		var e api.FileEvent
		if err := json.Unmarshal(w.lines.Bytes(), &e); err != nil {
			return e, fmt.Errorf("cordon serve: a watch's event: %w", err)
		}
		if e.Type == "end" {
			w.reason = e.Reason
			return e, io.EOF
		}
		return e, nil
	}
	if err := w.lines.Err(); err != nil && w.reason == "" {
		return api.FileEvent{}, err
	}
	return api.FileEvent{}, io.EOF
}

// EndReason says why the server ended the watch, once Next returned
// io.EOF; "" if it did not.
func (w *Watch) EndReason() string { return w.reason }

// Close stops the watch.
func (w *Watch) Close() error { return w.body.Close() }
