package sandbox

import (
	"bytes"
	"fmt"
	"io"
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

	mu             sync.Mutex
	stdout, stderr int64
	over           bool
	said           string // the first limit phrase seen in the output
}

// writer returns a Writer to dst that counts into the stream's counter.
func (c *outputCap) writer(dst io.Writer, stderr bool) io.Writer {
	return &capWriter{c: c, dst: dst, stderr: stderr}
}

// counts returns the bytes written to stdout and stderr.
func (c *outputCap) counts() (stdout, stderr int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout, c.stderr
}

// saidLimit returns the first of outcome.LimitPhrases the output held.
func (c *outputCap) saidLimit() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.said
}

type capWriter struct {
	c      *outputCap
	dst    io.Writer
	stderr bool
	tail   []byte // the end of the last write, for a phrase split across writes
}

// longestPhrase is the length of the longest limit phrase.
var longestPhrase = func() int {
	n := 0
	for p := range outcome.LimitPhrases {
		n = max(n, len(p))
	}
	return n
}()

// scan looks for a limit phrase in p, and across the boundary with the
// write before it.
func (w *capWriter) scan(p []byte) string {
	edge := append(w.tail, p[:min(len(p), longestPhrase-1)]...)
	found := ""
	for phrase := range outcome.LimitPhrases {
		in := bytes.Contains(p, []byte(phrase)) || bytes.Contains(edge, []byte(phrase))
		if in && (found == "" || phrase < found) {
			found = phrase
		}
	}
	if len(p) >= longestPhrase-1 {
		w.tail = append(w.tail[:0], p[len(p)-(longestPhrase-1):]...)
	} else {
		w.tail = append(w.tail[:0], edge[max(0, len(edge)-(longestPhrase-1)):]...)
	}
	return found
}

func (w *capWriter) Write(p []byte) (int, error) {
	c := w.c
	said := ""
	if w.c.saidLimit() == "" {
		said = w.scan(p)
	}
	c.mu.Lock()
	if said != "" && c.said == "" {
		c.said = said
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
