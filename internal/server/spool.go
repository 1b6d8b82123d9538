package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/bufpool"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// spoolMem is how much of each output stream of a command that does not
// stream the server keeps in memory; the rest waits in a spool file.
const spoolMem = 64 << 10

// outputSlack is what a sandbox writes past its output limit: the note
// that the output was truncated.
const outputSlack = 4 << 10

// output keeps the output of a command that does not stream, for its
// answer: per stream, the first spoolMem bytes in memory and the rest in
// a spool file, made private (0600, in the server's private spool
// directory) and unlinked at once, so that it goes with its descriptor
// (after the answer, or with the server, however it ends). Both streams
// together hold at most limit bytes: past it, the rest is dropped and stop
// ends the command.
type output struct {
	dir     string
	limit   int64
	byMax   bool // limit is commands.max_output, not the profile's
	stop    func()
	mu      sync.Mutex
	total   int64
	cut     bool
	err     error
	streams [2]spool
	// sums count and hash what each stream was given, for an
	// idempotency key's record.
	sums [2]*digestWriter
}

// spool is one stream of an output.
type spool struct {
	mem []byte
	f   *os.File
	n   int64 // in f
	// text says whether what was kept is valid UTF-8 (its text is then
	// answered too).
	text utf8Check
}

// newOutput makes the output of a command of e; stop ends the command.
func (s *Server) newOutput(p *profile.Profile, stop func()) *output {
	o := &output{dir: s.spoolDir, limit: s.cmdLimits.Output, byMax: true, stop: stop}
	if q := p.Resources.Output; q.Set() && q.N <= o.limit {
		o.limit, o.byMax = q.N+outputSlack, false
	}
	return o
}

// stream returns the writer of stream i (0 stdout, 1 stderr). It never
// fails: what cannot be kept is dropped, so that the command runs on to
// its end, and the outcome says so (see outputNote).
func (o *output) stream(i int) io.Writer { return outStream{o, i} }

// outStream is one stream's writer; runCommand asks it for its note.
type outStream struct {
	o *output
	i int
}

func (w outStream) Write(p []byte) (int, error) {
	w.o.write(&w.o.streams[w.i], p)
	return len(p), nil
}

func (w outStream) outputNote() string { return w.o.outputNote() }

func (o *output) write(sp *spool, p []byte) {
	o.mu.Lock()
	stop := false
	if o.cut || o.err != nil {
		p = nil
	} else if room := o.limit - o.total; int64(len(p)) > room {
		p, o.cut, stop = p[:room], true, true
	}
	o.total += int64(len(p))
	sp.text.feed(p)
	if n := min(len(p), spoolMem-len(sp.mem)); n > 0 {
		if sp.mem == nil {
			sp.mem = make([]byte, 0, min(spoolMem, max(n, 4<<10)))
		}
		sp.mem, p = append(sp.mem, p[:n]...), p[n:]
	}
	if len(p) > 0 {
		err := o.spill(sp, p)
		if err != nil && o.err == nil {
			o.err, stop = err, true
		}
	}
	o.mu.Unlock()
	if stop {
		o.stop()
	}
}

// spill appends p to the stream's spool file, made on first use.
func (o *output) spill(sp *spool, p []byte) error {
	if sp.f == nil {
		f, err := os.CreateTemp(o.dir, "out-*")
		if err != nil {
			return fmt.Errorf("making a spool file: %w", err)
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return fmt.Errorf("unlinking a spool file: %w", err)
		}
		sp.f = f
	}
	n, err := sp.f.Write(p)
	sp.n += int64(n)
	if err != nil {
		return fmt.Errorf("writing a spool file: %w", err)
	}
	return nil
}

// outputNote says what the server could not keep of the command's
// output, or "" when it kept all of it.
func (o *output) outputNote() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.err != nil:
		return fmt.Sprintf("the server could not keep the command's output (%v): the command was stopped", o.err)
	case o.cut && o.byMax:
		return fmt.Sprintf("the server keeps at most %s of the output of a command that does not stream (commands.max_output): the command was stopped there; stream its output for more", profile.FormatSize(o.limit))
	case o.cut:
		return fmt.Sprintf("the output passed the profile's output limit, and the server kept %d bytes of it", o.limit)
	}
	return ""
}

// failed is why the output could not be kept, as an error.
func (o *output) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return &spoolError{fmt.Sprintf("the command ran, but its output could not be kept (%v); run it again, streaming its output", o.err)}
	}
	return nil
}

// spoolError is a command's output that the server could not keep.
type spoolError struct{ msg string }

func (e *spoolError) Error() string { return e.msg }

// execStatus is the HTTP status of a command that could not run, or
// whose output could not be kept.
func execStatus(err error) int {
	var se *spoolError
	if errors.As(err, &se) {
		return http.StatusInsufficientStorage
	}
	return stepStatus(err)
}

// reader returns the stream's bytes.
func (sp *spool) reader() io.Reader {
	if sp.f == nil {
		return bytes.NewReader(sp.mem)
	}
	return io.MultiReader(bytes.NewReader(sp.mem), io.NewSectionReader(sp.f, 0, sp.n))
}

// Close lets the spool files go.
func (o *output) Close() {
	for i := range o.streams {
		if f := o.streams[i].f; f != nil {
			f.Close()
		}
	}
}

// writers are the buffered writers answers are written through, reused
// from one answer to the next.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// sendResult answers a command that did not stream: an api.ExecResult, or
// within info (an api.Sandbox) as its result, written as it is read from
// out, base64-encoded on the way, and again as text for a stream that is
// valid UTF-8: the answer is never whole in memory. A
// client that takes none of it for the send timeout is cut off.
func (s *Server) sendResult(w http.ResponseWriter, status int, info *api.Sandbox, out *output, o outcome.Outcome) int {
	g := newSendGuard(w, s.cmdLimits.Send)
	defer g.done()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(g)
	defer func() {
		bw.Reset(nil)
		writers.Put(bw)
	}()
	if info != nil {
		head, err := json.Marshal(info)
		if err != nil || len(head) < 2 {
			s.logf("encoding the answer: %v", err)
			return status
		}
		bw.Write(head[:len(head)-1]) // all but the closing brace
		bw.WriteString(`,"result":`)
	}
	bw.WriteString(`{"stdout":"`)
	if !copyBase64(bw, out.streams[0].reader(), g) {
		return status
	}
	bw.WriteString(`","stderr":"`)
	if !copyBase64(bw, out.streams[1].reader(), g) {
		return status
	}
	bw.WriteByte('"')
	for i, name := range [2]string{"stdout_text", "stderr_text"} {
		if !out.streams[i].text.valid() {
			continue
		}
		bw.WriteString(`,"` + name + `":"`)
		if !copyJSONText(bw, out.streams[i].reader(), g) {
			return status
		}
		bw.WriteByte('"')
	}
	bw.WriteString(`,"outcome":`)
	tail, err := json.Marshal(o)
	if err != nil {
		s.logf("encoding the answer: %v", err)
		return status
	}
	bw.Write(tail)
	if info != nil {
		bw.WriteByte('}')
	}
	bw.WriteString("}\n")
	bw.Flush()
	return status
}

// copyBase64 writes r to w in base64, and reports whether the client
// still takes it. A spool that cannot be read cuts the answer short, not
// well-formed: the client sees it broken, never silently shorter.
func copyBase64(w io.Writer, r io.Reader, g *sendGuard) bool {
	enc := base64.NewEncoder(base64.StdEncoding, w)
	b := bufpool.Get()
	defer bufpool.Put(b)
	buf := b[:30<<10] // a multiple of 3: no carry between reads
	for !g.failed.Load() {
		n, err := io.ReadFull(r, buf)
		enc.Write(buf[:n])
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return false
		}
	}
	enc.Close()
	return !g.failed.Load()
}

// makeSpool makes the private directory of the spool files: dir (0700,
// not a symbolic link), or one of the server's own in the system's
// temporary directory, removed by Close.
func (s *Server) makeSpool(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "cordon-spool-")
		if err != nil {
			return fmt.Errorf("server: making a spool directory: %w", err)
		}
		s.spoolDir, s.dropSpool = d, true
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("server: spool directory: %w", err)
	}
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("server: spool directory %s: not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("server: spool directory: making it private: %w", err)
	}
	s.spoolDir = dir
	return nil
}
