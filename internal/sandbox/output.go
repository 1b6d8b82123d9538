package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// outputCap counts what the command writes to stdout and stderr together
// and, past the limit, stops passing it on: the part that fits is written,
// a marker says the output was truncated, and trip ends the run.
type outputCap struct {
	limit  int64 // 0: no limit
	marker io.Writer
	trip   func()

	// protected are the protected paths of the run, looked for in the
	// lines of standard error that hold a refusal (see sawLine); set
	// before any writer is made.
	protected []protectedName

	mu             sync.Mutex
	stdout, stderr int64
	over           bool
	said           []string     // the limit phrases seen, in order
	named          []string     // the protected paths seen, in order
	scanners       []*capWriter // the writers that scan, for their last lines
}

// writer returns a Writer to dst that counts into the stream's counter;
// standard error is also scanned for limit phrases.
func (c *outputCap) writer(dst io.Writer, stderr bool) io.Writer {
	return c.scanner(&capWriter{c: c, dst: dst, stderr: stderr, scans: stderr})
}

// terminal returns the Writer for a terminal's output, where standard
// output and standard error are one stream: counted as standard output,
// scanned as standard error.
func (c *outputCap) terminal(dst io.Writer) io.Writer {
	return c.scanner(&capWriter{c: c, dst: dst, scans: true})
}

func (c *outputCap) scanner(w *capWriter) *capWriter {
	if w.scans && len(c.protected) > 0 {
		c.mu.Lock()
		c.scanners = append(c.scanners, w)
		c.mu.Unlock()
	}
	return w
}

// protectedSaid returns the protected paths that lines of the command's
// standard error named together with a refusal, in the order first seen.
func (c *outputCap) protectedSaid() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.scanners {
		// A last line without its newline.
		if len(w.line) > 0 {
			c.sawLine(w.line)
			w.line = w.line[:0]
		}
	}
	return slices.Clone(c.named)
}

// counts returns the bytes written to stdout and stderr.
func (c *outputCap) counts() (stdout, stderr int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout, c.stderr
}

// saidLimits returns the limit phrases the command's standard error held,
// in the order first seen.
func (c *outputCap) saidLimits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.said)
}

type capWriter struct {
	c      *outputCap
	dst    io.Writer
	stderr bool
	scans  bool   // look for limit phrases (standard error, or a terminal)
	tail   []byte // the end of the last write, for a phrase split across writes
	line   []byte // the line being written, up to maxLine bytes of it
}

// lines passes each line of p that ends to sawLine, keeping the one that
// does not for the next write; c.mu is held.
func (w *capWriter) lines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		w.line = append(w.line, part[:min(len(part), maxLine-len(w.line))]...)
		if i < 0 {
			return
		}
		w.c.sawLine(w.line)
		w.line, p = w.line[:0], p[i+1:]
	}
}

// phrases are outcome.LimitPhrases, in a fixed order.
var phrases = slices.Sorted(maps.Keys(outcome.LimitPhrases))

// longestPhrase is the length of the longest limit phrase, and one byte
// after it.
var longestPhrase = len(slices.MaxFunc(phrases, func(a, b string) int { return len(a) - len(b) })) + 1

// scan returns the limit phrases in p, also across the boundary with the
// write before it; those of outcome.EndsMessage only where followed by a
// line's end or ':', or by nothing yet.
func (w *capWriter) scan(p []byte) []string {
	edge := append(w.tail, p[:min(len(p), longestPhrase)]...)
	var found []string
	for _, phrase := range phrases {
		if found1(p, phrase) || found1(edge, phrase) {
			found = append(found, phrase)
		}
	}
	if len(p) >= longestPhrase {
		w.tail = append(w.tail[:0], p[len(p)-longestPhrase:]...)
	} else {
		w.tail = append(w.tail[:0], edge[max(0, len(edge)-longestPhrase):]...)
	}
	return found
}

// found1 reports whether phrase occurs in b (where a message ends, for
// those that must).
func found1(b []byte, phrase string) bool {
	if !outcome.EndsMessage[phrase] {
		return bytes.Contains(b, []byte(phrase))
	}
	for {
		i := bytes.Index(b, []byte(phrase))
		if i < 0 {
			return false
		}
		b = b[i+len(phrase):]
		if len(b) == 0 || b[0] == '\n' || b[0] == '\r' || b[0] == ':' {
			return true
		}
	}
}

func (w *capWriter) Write(p []byte) (int, error) {
	c := w.c
	var said []string
	if w.scans {
		said = w.scan(p)
	}
	c.mu.Lock()
	if w.scans && len(c.protected) > 0 {
		w.lines(p)
	}
	for _, phrase := range said {
		if !slices.Contains(c.said, phrase) {
			c.said = append(c.said, phrase)
		}
	}
	if w.stderr {
		c.stderr += int64(len(p))
	} else {
		c.stdout += int64(len(p))
	}
	total := c.stdout + c.stderr
	pass := p
	justOver := false
	if c.over {
		pass = nil
	} else if c.limit > 0 && total > c.limit {
		pass = p[:max(0, int64(len(p))-(total-c.limit))]
		c.over, justOver = true, true
	}
	c.mu.Unlock()
	if len(pass) > 0 {
		if _, err := w.dst.Write(pass); err != nil {
			return 0, err
		}
	}
	if justOver {
		fmt.Fprintf(c.marker, "\n[cordon: output truncated: the output limit (%d bytes) was reached]\n", c.limit)
		c.trip()
	}
	// Report everything as written: the rest is dropped, not an error the
	// command should see before it is stopped.
	return len(p), nil
}
