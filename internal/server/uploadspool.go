package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// previewBytes is how much of a command's stdin, or of an upload, an
// approver is shown (escaped, on one line).
const previewBytes = 256

// content is what an approver sees, and a retried step must match, of
// bytes too large to show whole: their size, their SHA-256 and a preview
// of their beginning.
type content struct {
	Bytes   int64  `json:"bytes"`
	SHA256  string `json:"sha256"`
	Preview string `json:"preview"`
}

// describe reads r to its end and describes what it read.
func describe(r io.Reader) (content, error) {
	head := &cappedBuffer{max: previewBytes}
	d := newDigestWriter(head)
	if _, err := io.Copy(d, r); err != nil {
		return content{}, err
	}
	return content{Bytes: d.n, SHA256: d.sum(), Preview: preview(head.Bytes(), d.n)}, nil
}

// preview is the beginning of n bytes, escaped for display: control
// characters, bidirectional controls and invalid UTF-8 as escapes; "..."
// when there is more.
func preview(head []byte, n int64) string {
	s := termsafe.Line(string(head))
	if n > int64(len(head)) {
		s += "..."
	}
	return s
}

// uploads are the upload bodies waiting, whole, until their step is
// decided: files of the server's spool directory (see makeSpool).
type uploads struct {
	dir string
}

// uploadPattern names the files of uploads.
const uploadPattern = "upload-*"

// openUploads keeps upload bodies in dir, and removes what an earlier
// server left there.
func openUploads(dir string) *uploads {
	left, _ := filepath.Glob(filepath.Join(dir, uploadPattern))
	for _, f := range left {
		os.Remove(f)
	}
	return &uploads{dir: dir}
}

// errTooLarge is a body over the size it may have.
var errTooLarge = errors.New("too large")

// spooled is an upload's body in the spool, described.
type spooled struct {
	f *os.File
	content
}

// take copies at most max bytes of body into a file of the spool (0600,
// removed from the directory at once: only this server holds it), and
// describes them; errTooLarge when body holds more.
func (sp *uploads) take(body io.Reader, max int64) (*spooled, error) {
	f, err := os.CreateTemp(sp.dir, uploadPattern)
	if err != nil {
		return nil, fmt.Errorf("spooling the upload: %w", err)
	}
	os.Remove(f.Name())
	d, err := describe(io.TeeReader(io.LimitReader(body, max+1), f))
	if err == nil && d.Bytes > max {
		err = errTooLarge
	}
	if err != nil {
		f.Close()
		if !errors.Is(err, errTooLarge) {
			err = fmt.Errorf("spooling the upload: %w", err)
		}
		return nil, err
	}
	return &spooled{f: f, content: d}, nil
}

// reader reads the spooled body from its start, as much as was described.
func (s *spooled) reader() io.Reader { return io.NewSectionReader(s.f, 0, s.Bytes) }

// Close lets the spooled body go.
func (s *spooled) Close() error { return s.f.Close() }

// envMap is a command's environment (NAME=value) as a map.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// spoolBody takes a request's body whole into the spool, at most max
// bytes (what names the body in errors: "the upload"): the spooled body,
// or the status already answered (413 over max, 500 when it cannot be
// kept; nothing was done either way).
func (s *Server) spoolBody(w http.ResponseWriter, r *http.Request, max int64, what string) (*spooled, int) {
	if r.ContentLength > max {
		drainRefused(w, r)
		return nil, fail(w, http.StatusRequestEntityTooLarge, "%s is %d bytes, over its limit of %d", what, r.ContentLength, max)
	}
	body, err := s.uploads.take(r.Body, max)
	switch {
	case errors.Is(err, errTooLarge):
		drainRefused(w, r)
		return nil, fail(w, http.StatusRequestEntityTooLarge, "%s is over its limit of %d bytes; nothing was written", what, max)
	case err != nil:
		s.logf("%v", err)
		return nil, fail(w, http.StatusInternalServerError, "%v; nothing was written", err)
	}
	return body, 0
}
