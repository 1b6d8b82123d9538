// Package tools holds cordon's built-in tools: read_file, write_file,
// list_files and fetch. Each runs inside a sandbox built from the agent's
// profile (cordon runs itself there as the hidden subcommand Arg), so a
// tool reaches only what the profile's view, Landlock, the user mapping
// and the egress allowlist let it: the paths the profile names, read-only
// unless it says otherwise, and the destinations it allows, through the
// egress proxy. A tool reads its arguments as JSON on stdin and writes its
// result as JSON on stdout.
package tools

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// Arg is the hidden subcommand that runs a built-in tool in a sandbox.
const Arg = "__tool"

// Names are the built-in tools.
var Names = []string{"fetch", "list_files", "read_file", "write_file"}

// Limits on what one call reads, lists or fetches.
const (
	DefaultMaxBytes = 256 << 10
	MaxBytes        = 16 << 20
	maxEntries      = 10000
	fetchTimeout    = 30 * time.Second
)

// Args are the arguments of every built-in tool; each uses its own.
type Args struct {
	Path     string `json:"path,omitempty"`
	Content  string `json:"content,omitempty"`
	Append   bool   `json:"append,omitempty"`
	URL      string `json:"url,omitempty"`
	Method   string `json:"method,omitempty"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
}

// Result is what a built-in tool returns.
type Result struct {
	Path string `json:"path,omitempty"`
	// Content is a file's or a response's body: UTF-8 text, or base64
	// when Encoding says so.
	Content   string  `json:"content,omitempty"`
	Encoding  string  `json:"encoding,omitempty"`
	Size      int64   `json:"size,omitempty"`
	Truncated bool    `json:"truncated,omitempty"`
	Written   int64   `json:"written,omitempty"`
	Entries   []Entry `json:"entries,omitempty"`
	Status    int     `json:"status,omitempty"`
	Type      string  `json:"content_type,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// Entry is one directory entry.
type Entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size,omitempty"`
}

// Main runs the built-in tool name with the JSON arguments on stdin and
// prints its result; exit status 1 when the tool failed, 2 on bad input.
func Main(name string, stdin io.Reader, stdout io.Writer) int {
	var a Args
	data, err := io.ReadAll(io.LimitReader(stdin, MaxBytes+1<<20))
	if err == nil {
		err = DecodeStrict(data, &a)
	}
	if err != nil {
		return report(stdout, Result{Error: fmt.Sprintf("arguments of %s: %v", name, err)}, 2)
	}
	r, err := Do(name, a)
	if err != nil {
		r.Error = err.Error()
		return report(stdout, r, 1)
	}
	return report(stdout, r, 0)
}

func report(w io.Writer, r Result, code int) int {
	b, _ := json.Marshal(r)
	fmt.Fprintln(w, string(b))
	return code
}

// Do runs one built-in tool.
func Do(name string, a Args) (Result, error) {
	limit := a.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	if limit > MaxBytes {
		return Result{}, fmt.Errorf("max_bytes: at most %d", MaxBytes)
	}
	switch name {
	case "read_file":
		return readFile(a.Path, limit)
	case "write_file":
		return writeFile(a.Path, a.Content, a.Append)
	case "list_files":
		return listFiles(a.Path)
	case "fetch":
		return fetch(a.URL, a.Method, limit)
	}
	return Result{}, fmt.Errorf("%s is not a built-in tool (%s)", name, strings.Join(Names, ", "))
}

func needPath(p string) error {
	if p == "" {
		return errors.New("path: missing")
	}
	return nil
}

func readFile(path string, limit int64) (Result, error) {
	if err := needPath(path); err != nil {
		return Result{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Result{}, err
	}
	if !fi.Mode().IsRegular() {
		return Result{}, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return Result{}, err
	}
	r := Result{Path: path, Size: fi.Size(), Truncated: int64(len(b)) > limit}
	if r.Truncated {
		b = b[:limit]
	}
	r.Content, r.Encoding = text(b)
	return r, nil
}

func writeFile(path, content string, appendTo bool) (Result, error) {
	if err := needPath(path); err != nil {
		return Result{}, err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return Result{}, err
	}
	n, err := f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	return Result{Path: path, Written: int64(n)}, nil
}

func listFiles(path string) (Result, error) {
	if path == "" {
		path = "."
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return Result{}, err
	}
	r := Result{Path: path}
	for _, e := range ents {
		if len(r.Entries) == maxEntries {
			r.Truncated = true
			break
		}
		en := Entry{Name: e.Name(), Type: kind(e.Type())}
		if e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				en.Size = fi.Size()
			}
		}
		r.Entries = append(r.Entries, en)
	}
	return r, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return "file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// fetch makes an HTTP request through the sandbox's egress proxy (the
// environment cordon sets names it); with no proxy, the sandbox has no
// network at all.
func fetch(url, method string, limit int64) (Result, error) {
	if url == "" {
		return Result{}, errors.New("url: missing")
	}
	switch method {
	case "":
		method = http.MethodGet
	case http.MethodGet, http.MethodHead:
	default:
		return Result{}, fmt.Errorf("method: %s is not GET or HEAD", method)
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return Result{}, err
	}
	c := &http.Client{Timeout: fetchTimeout, Transport: &http.Transport{Proxy: proxy}}
	resp, err := c.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Result{}, err
	}
	r := Result{Status: resp.StatusCode, Type: resp.Header.Get("Content-Type"), Truncated: int64(len(b)) > limit}
	if r.Truncated {
		b = b[:limit]
	}
	r.Content, r.Encoding = text(b)
	return r, nil
}

// proxy sends every request to the egress proxy cordon names in the
// sandbox's environment, loopback ones too: the sandbox's own loopback
// holds nothing, and the host's is reached, when the profile allows it,
// only through the proxy.
func proxy(*http.Request) (*url.URL, error) {
	p := os.Getenv("HTTP_PROXY")
	if p == "" {
		return nil, nil // no proxy: the sandbox has no network
	}
	return url.Parse(p)
}

// text returns b as a string, and the encoding it needs: none for UTF-8.
func text(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}
