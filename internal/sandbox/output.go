package sandbox

import (
	"fmt"
	"io"
	"sync"
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

type capWriter struct {
	c      *outputCap
	dst    io.Writer
	stderr bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
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
