package audit

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"sync"
	"unicode/utf8"
)

// Capture records what passes through it for the log: its size, its
// SHA-256 and its first bytes, up to a cap.
type Capture struct {
	max  int
	mu   sync.Mutex
	n    int64
	sum  hash.Hash
	head []byte
}

// NewCapture keeps up to max bytes of what is written.
func NewCapture(max int) *Capture { return &Capture{max: max, sum: sha256.New()} }

func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	c.sum.Write(p)
	if room := c.max - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Summary is what the log keeps of a stream: "head" as text when it is
// UTF-8, else "head_base64".
func (c *Capture) Summary(stream string) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"stream": stream, "bytes": c.n, "sha256": hex.EncodeToString(c.sum.Sum(nil)), "captured": len(c.head)}
	if utf8.Valid(c.head) {
		m["head"] = string(c.head)
	} else {
		m["head_base64"] = base64.StdEncoding.EncodeToString(c.head)
	}
	return m
}
