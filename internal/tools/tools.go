// Package tools holds cordon's built-in tools: read_file, write_file,
// list_files and fetch. Each runs inside a sandbox built from the agent's
// profile (cordon runs itself there as the hidden subcommand Arg), so a
// tool reaches only what the profile's view, Landlock, the user mapping
// and the egress allowlist let it: the paths the profile names, read-only
// unless it says otherwise, and the destinations it allows, through the
// egress proxy. A tool reads its arguments as JSON on stdin and writes its
// result as JSON on stdout.
//
// A tool acts on exactly the file its call was decided on: the gateway
// resolves path arguments first (the hidden mode ResolveArg, in a sandbox
// of the same profile) and passes each resolved file's identity; the tool
// opens it name by name without following links, and checks it.
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
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
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

// toolArgs are the fields each built-in tool declares: a tool decodes
// only its own, and refuses the others' (read_file takes no content).
var toolArgs = map[string]func() any{
	"read_file": func() any {
		return &struct {
			Path     string `json:"path"`
			MaxBytes int64  `json:"max_bytes"`
		}{}
	},
	"write_file": func() any {
		return &struct {
			Path    string `json:"path"`
			Content string `json:"content"`
			Append  bool   `json:"append"`
		}{}
	},
	"list_files": func() any {
		return &struct {
			Path string `json:"path"`
		}{}
	},
	"fetch": func() any {
		return &struct {
			URL      string `json:"url"`
			Method   string `json:"method"`
			MaxBytes int64  `json:"max_bytes"`
		}{}
	},
}

// Decode decodes the JSON arguments of the built-in tool name as DecodeStrict
// does, into that tool's own fields only.
func Decode(name string, data []byte) (Args, error) {
	mk, ok := toolArgs[name]
	if !ok {
		return Args{}, fmt.Errorf("%s is not a built-in tool (%s)", name, strings.Join(Names, ", "))
	}
	v := mk()
	if err := DecodeStrict(data, v); err != nil {
		return Args{}, err
	}
	// Every tool's fields are a subset of Args's, by the same names.
	b, _ := json.Marshal(v)
	var a Args
	if err := json.Unmarshal(b, &a); err != nil {
		return Args{}, err
	}
	return a, nil
}

// FreshLayerArg, among the expects, says that the tool is the only command
// of a new sandbox of a guarded workspace, started after its path was
// resolved in another: a decided file is then known by its inode (see
// decided).
const FreshLayerArg = "--fresh-layer"

// Main runs the built-in tool name with the JSON arguments on stdin and
// prints its result; exit status 1 when the tool failed, 2 on bad input.
// expects are the files its path arguments were decided on (ExpectArg);
// without one, the tool resolves its path itself.
func Main(name string, expects []string, stdin io.Reader, stdout io.Writer) int {
	bad := func(err error) int {
		return report(stdout, Result{Error: fmt.Sprintf("arguments of %s: %v", name, err)}, 2)
	}
	decided := map[string]File{}
	for _, e := range expects {
		if e == FreshLayerArg {
			freshLayer = true
			continue
		}
		arg, f, err := parseExpect(e)
		if err != nil {
			return bad(err)
		}
		decided[arg] = f
	}
	data, err := io.ReadAll(io.LimitReader(stdin, MaxBytes+1<<20))
	if err != nil {
		return bad(err)
	}
	a, err := Decode(name, data)
	if err != nil {
		return bad(err)
	}
	for arg, f := range decided {
		if arg != "path" || a.Path == "" {
			return bad(fmt.Errorf("a decided file for %q, which the call does not give", arg))
		}
		// The path given is the resolved one the policy decided on.
		f.Path = a.Path
		decided[arg] = f
	}
	r, err := run(name, a, decided)
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

// Do runs one built-in tool, resolving its path itself.
func Do(name string, a Args) (Result, error) {
	return run(name, a, nil)
}

// run runs one built-in tool on the files decided for its path arguments
// (decided["path"]); a path not decided is resolved here.
func run(name string, a Args, decided map[string]File) (Result, error) {
	limit := a.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	if limit > MaxBytes {
		return Result{}, fmt.Errorf("max_bytes: at most %d", MaxBytes)
	}
	file := func(p string) (File, error) {
		if f, ok := decided["path"]; ok {
			return f, nil
		}
		if p == "" {
			return File{}, errors.New("path: missing")
		}
		return Resolve(p)
	}
	switch name {
	case "read_file", "write_file":
		if a.Path == "" {
			return Result{}, errors.New("path: missing")
		}
	case "list_files":
		if a.Path == "" {
			a.Path = "."
		}
	}
	switch name {
	case "read_file":
		f, err := file(a.Path)
		if err != nil {
			return Result{}, err
		}
		return readFile(a.Path, f, limit)
	case "write_file":
		f, err := file(a.Path)
		if err != nil {
			return Result{}, err
		}
		return writeFile(a.Path, f, a.Content, a.Append)
	case "list_files":
		f, err := file(a.Path)
		if err != nil {
			return Result{}, err
		}
		return listFiles(a.Path, f)
	case "fetch":
		return fetch(a.URL, a.Method, limit)
	}
	return Result{}, fmt.Errorf("%s is not a built-in tool (%s)", name, strings.Join(Names, ", "))
}

func readFile(path string, file File, limit int64) (Result, error) {
	if !file.Exists {
		return Result{}, &os.PathError{Op: "open", Path: path, Err: unix.ENOENT}
	}
	f, err := openDecided(file, os.O_RDONLY, 0)
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

func writeFile(path string, file File, content string, appendTo bool) (Result, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := openDecided(file, flags, 0o644)
	if err != nil {
		return Result{}, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return Result{}, fmt.Errorf("%s is not a regular file", path)
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

func listFiles(path string, file File) (Result, error) {
	if !file.Exists {
		return Result{}, &os.PathError{Op: "open", Path: path, Err: unix.ENOENT}
	}
	f, err := openDecided(file, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return Result{}, err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	hidden := wire.ReadPlaceholders()
	r := Result{Path: path}
	for _, e := range ents {
		if placeholder(f, e.Name(), hidden) {
			continue
		}
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

// placeholder reports whether the entry name of the directory d is one of
// cordon's placeholders (hidden, see wire.PlaceholdersFile): cordon's, not
// the workspace's, and never listed.
func placeholder(d *os.File, name string, hidden map[protect.ID]bool) bool {
	if len(hidden) == 0 {
		return false
	}
	var st unix.Stat_t
	if unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}]
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
