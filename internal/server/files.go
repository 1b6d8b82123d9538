package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// FileArg is the hidden subcommand that reads or writes one file inside a
// sandbox: files move in and out through the sandbox itself, run as its
// user under its Landlock rules and in its mount namespace, so an upload or
// a download reaches exactly what a command of the sandbox could, and the
// profile's limits (file_size, tmp_size, output) apply.
const FileArg = "__file"

// Exit statuses of FileMain.
const (
	fileNotFound = 2
	fileDenied   = 3
	fileInvalid  = 4
	fileUsage    = 5
	fileTooLarge = 6
)

// FileMain runs `cordon __file OP PATH [ARG]` inside a sandbox: read
// copies the file to stdout, write replaces it with stdin (created with
// MODE, octal, default 0644), list writes the listing of a directory (at
// most ARG entries) as JSON, tar-out writes a directory as a tar stream and
// tar-in extracts one from stdin into a directory (see dirOp); stat,
// remove, rename and mkdir act on names (see fileOp); watch writes the
// changes under a directory (see watchDir). It returns the exit status.
func FileMain(args []string) int {
	if len(args) < 2 || !path.IsAbs(args[1]) {
		fmt.Fprintln(os.Stderr, "usage: __file read|write /PATH [MODE]")
		return fileUsage
	}
	op, p := args[0], args[1]
	var err error
	switch op {
	case "read":
		var f *os.File
		if f, err = os.Open(p); err == nil {
			var st os.FileInfo
			if st, err = f.Stat(); err == nil && st.IsDir() {
				err = fmt.Errorf("%s is a directory: %w", p, fs.ErrInvalid)
			} else if err == nil {
				_, err = io.Copy(os.Stdout, f)
			}
			f.Close()
		}
	case "write":
		mode := uint64(0o644)
		if len(args) > 2 {
			if mode, err = strconv.ParseUint(args[2], 8, 32); err != nil || mode&^0o777 != 0 {
				fmt.Fprintf(os.Stderr, "mode %q: want permission bits in octal, such as 644\n", args[2])
				return fileUsage
			}
		}
		var f *os.File
		if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, os.FileMode(mode)); err == nil {
			_, err = io.Copy(f, os.Stdin)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	case "list", "tar-out", "tar-in":
		if err = dirOp(op, p, args[2:]); errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, err)
			return fileUsage
		}
	case "watch":
		recursive := len(args) == 3 && args[2] == "recursive"
		if len(args) > 3 || len(args) == 3 && !recursive {
			fmt.Fprintln(os.Stderr, "usage: __file watch /DIR [recursive]")
			return fileUsage
		}
		hidden := wire.ReadPlaceholders()
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}] {
			err = fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		} else {
			err = watchDir(p, recursive, hidden, os.Stdout)
		}
	case "stat", "remove", "rename", "mkdir":
		if err = fileOp(op, p, args[2:], wire.ReadPlaceholders(), os.Stdout); errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, err)
			return fileUsage
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: __file read|write|list|tar-out|tar-in|stat|remove|rename|mkdir|watch /PATH [ARG]")
		return fileUsage
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintln(os.Stderr, err)
		return fileNotFound
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS):
		fmt.Fprintln(os.Stderr, err)
		return fileDenied
	case errors.Is(err, unix.EFBIG):
		fmt.Fprintln(os.Stderr, err)
		return fileTooLarge
	default:
		fmt.Fprintln(os.Stderr, err)
		return fileInvalid
	}
}

// fileStatus is the HTTP status of a file operation's outcome.
func fileStatus(o outcome.Outcome) int {
	if o.Status == outcome.OK {
		return http.StatusOK
	}
	if o.CommandExitCode != nil && o.Limit == nil {
		switch *o.CommandExitCode {
		case fileNotFound:
			return http.StatusNotFound
		case fileDenied:
			return http.StatusForbidden
		case fileInvalid, fileUsage:
			return http.StatusBadRequest
		case fileTooLarge:
			return http.StatusRequestEntityTooLarge
		}
	}
	if o.Status == outcome.FileSizeLimit {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInsufficientStorage
}

// fileArgs checks the path of a files request.
func fileArgs(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if !path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path: want an absolute path inside the sandbox, found %q", p)
	}
	return p, nil
}

// fileTarget is the sandbox and the path of a files request, in a
// command's slot, or the status already answered when there is none. The
// caller releases the slot.
func (s *Server) fileTarget(w http.ResponseWriter, r *http.Request, c caller) (*entry, string, func(), int) {
	e, status := s.live(w, r, c)
	if e == nil {
		return nil, "", nil, status
	}
	release, status := s.slot(w, e.agent.Name, e.id)
	if release == nil {
		return nil, "", nil, status
	}
	p, err := fileArgs(r)
	if err != nil {
		release()
		return nil, "", nil, fail(w, http.StatusBadRequest, "%v", err)
	}
	return e, p, release, 0
}

// fileParams are the query parameters each file operation takes besides
// its path, by its audit action.
var fileParams = map[string][]string{
	"file_write":  {"mode"},
	"file_remove": {"recursive"},
	"file_rename": {"to"},
	"file_watch":  {"recursive"},
}

// fileStep starts a files request on p in e as a step of the sandbox's
// session, body describing an upload's content (nil for a download): the
// status already answered when it cannot.
func (s *Server) fileStep(w http.ResponseWriter, r *http.Request, c caller, e *entry, p, kind, action string, body *content) int {
	// What an approver sees, and what a retry must match: the operation
	// itself (a mkdir's approval is no remove's, a stat's no download's),
	// the path, and what else the operation takes from the request.
	what := map[string]any{"operation": action, "path": p}
	for _, k := range fileParams[action] {
		if v := r.URL.Query().Get(k); v != "" {
			what[k] = v
		}
	}
	if body != nil {
		what["content"] = *body
	}
	if err := s.begin(e, c, kind, func() (any, error) { return what, nil }); err != nil {
		return failStep(w, err)
	}
	rec := map[string]any{"path": p, "token": c.name()}
	if body != nil {
		rec["bytes"], rec["sha256"] = body.Bytes, body.SHA256
	}
	s.record(e.id, c, audit.Action, action, rec)
	if err := s.recordAction(); err != nil {
		s.finish(e, kind, p, nil, true)
		return failStep(w, err)
	}
	return 0
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, c caller) int {
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	if status := s.fileStep(w, r, c, e, p, "files.read", "file_read", nil); status != 0 {
		return status
	}
	// A client that stops reading cannot hold the command: past the send
	// timeout, the rest is dropped and the answer cut short.
	g := newSendGuard(w, s.cmdLimits.Send)
	defer g.done()
	body := &lazyBody{w: g}
	var stderr bytes.Buffer
	o, err := e.box.Exec(r.Context(), sandbox.ExecOptions{Args: []string{"cordon", FileArg, "read", p}, SelfExec: true, Stdout: body, Stderr: &stderr})
	switch {
	case err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case o.Status == outcome.OK:
		status = body.finish()
	case body.started():
		// The status was sent with the first bytes; the body is cut short.
		status = http.StatusOK
	default:
		status = fail(w, fileStatus(o), "reading %s in sandbox %s: %s", p, e.id, fileMessage(o, stderr.String()))
	}
	s.afterStep(e, c, "files.read", p, &o, err, status, map[string]any{"bytes": body.n})
	return status
}

// maxUpload bounds an upload whatever the profile's file_size.
const maxUpload = 1 << 30

// uploadMax is the most an upload to e may hold: the profile's file_size,
// at most maxUpload.
func uploadMax(e *entry) int64 {
	if q := e.profile.Resources.FileSize; q.Set() && q.N < maxUpload {
		return q.N
	}
	return maxUpload
}

// upload writes a file in a sandbox. Its body is known whole before the
// step is decided: spooled (see spool), refused with 413 over the file
// size limit, described to an approver by size, SHA-256 and beginning,
// and what the sandbox is fed is the spooled body, exactly.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, c caller) int {
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	body, status := s.spoolBody(w, r, uploadMax(e), "the upload (limit: the sandbox's file size)")
	if body == nil {
		return status
	}
	defer body.Close()
	if status := s.fileStep(w, r, c, e, p, "files.write", "file_write", &body.content); status != 0 {
		return status
	}
	args := []string{"cordon", FileArg, "write", p}
	if m := r.URL.Query().Get("mode"); m != "" {
		args = append(args, m)
	}
	counted := &countingReader{r: body.reader()}
	var stderr bytes.Buffer
	o, err := e.box.Exec(r.Context(), sandbox.ExecOptions{Args: args, SelfExec: true, Stdin: counted, Stderr: &stderr})
	var landed *outcome.Changes
	if err == nil {
		landed = s.landAfter(e, c.name())
	}
	switch {
	case err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case o.Status == outcome.OK:
		ans := map[string]any{"path": p, "bytes": counted.n.Load()}
		if landed != nil {
			ans["changes"] = landed
		}
		status = reply(w, http.StatusOK, ans)
	default:
		status = fail(w, fileStatus(o), "writing %s in sandbox %s: %s", p, e.id, fileMessage(o, stderr.String()))
	}
	s.afterStep(e, c, "files.write", p, &o, err, status, map[string]any{"bytes": counted.n.Load()})
	return status
}

// fileMessage says why a file operation failed.
func fileMessage(o outcome.Outcome, stderr string) string {
	if msg := strings.TrimSpace(stderr); msg != "" && o.Limit == nil {
		return msg
	}
	return o.Message
}

// afterStep records a file operation with what it did (data) and counts it
// in the session.
func (s *Server) afterStep(e *entry, c caller, kind, p string, o *outcome.Outcome, err error, status int, data map[string]any) {
	data["path"], data["status"] = p, status
	if err == nil && o.Status != outcome.OK {
		data["outcome"] = o
	}
	s.record(e.id, c, audit.Decision, kind, data)
	s.finish(e, kind, p, o, status == http.StatusForbidden || err != nil)
	s.recorded()
}

// lazyBody sends 200 with the first byte of a download, so that a file
// that cannot be opened is still answered with its own status.
type lazyBody struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	sent bool
	n    int64
	// contentType is the body's; "" is application/octet-stream.
	contentType string
}

func (b *lazyBody) typ() string {
	if b.contentType == "" {
		return "application/octet-stream"
	}
	return b.contentType
}

func (b *lazyBody) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.sent {
		b.w.Header().Set("Content-Type", b.typ())
		b.w.WriteHeader(http.StatusOK)
		b.sent = true
	}
	b.n += int64(len(p))
	return b.w.Write(p)
}

func (b *lazyBody) started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent
}

// finish answers an empty file.
func (b *lazyBody) finish() int {
	if !b.started() {
		b.w.Header().Set("Content-Type", b.typ())
		b.w.WriteHeader(http.StatusOK)
	}
	return http.StatusOK
}

// countingReader counts what is read through it; the count may be read
// while another goroutine still reads.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
