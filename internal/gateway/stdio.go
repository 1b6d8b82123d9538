package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// envelopeBytes is what a message may carry beside a call's arguments
// (the JSON-RPC envelope, the tool's name, _meta).
const envelopeBytes = 1 << 20

// MessageCap is the largest message the gateway reads from an agent: the
// profile's bound of a call's arguments and room for the rest.
func MessageCap(p *profile.Profile) int64 { return p.ArgumentCap() + envelopeBytes }

// Stdio is a transport of newline-delimited JSON-RPC on r and w, as the
// MCP SDK's stdio transport, whose reader bounds each message: a message
// larger than MessageCap is never held whole nor passed on; the agent gets
// a JSON-RPC error for it (with its id, where the message has one), the
// audit log its size and digest, and the session goes on. (The SDK's own
// transport ends the session on a line over its bound.)
func (g *Gateway) Stdio(r io.ReadCloser, w io.Writer) mcp.Transport {
	limit := MessageCap(g.cfg.Profile)
	out := &lockedWriter{w: w}
	pr, pw := io.Pipe()
	go func() {
		err := boundLines(r, pw, limit, func(over *oversized) error {
			g.refuseMessage(out, over, limit)
			return nil
		})
		pw.CloseWithError(err)
	}()
	return &mcp.IOTransport{Reader: readCloser{pr, r}, Writer: out, MaxLineLength: int(limit) + 1}
}

// readCloser reads the bounded messages; closing it closes the input too.
type readCloser struct {
	*io.PipeReader
	in io.Closer
}

func (c readCloser) Close() error {
	c.PipeReader.Close()
	return c.in.Close()
}

// lockedWriter writes one message at a time: the SDK's and the refusals.
// Closing it leaves w open (it is stdout).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) Close() error { return nil }

// boundLines copies the lines of r to pw, each at most limit bytes; a
// longer line is read to its end without being kept, and given to refuse.
func boundLines(r io.Reader, pw io.Writer, limit int64, refuse func(*oversized) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if int64(len(line)+len(chunk)) <= limit {
			line = append(line, chunk...)
		} else {
			// Too long: the rest of the line is only counted and hashed.
			over := &oversized{h: sha256.New()}
			over.write(line)
			line = line[:0]
			over.write(chunk)
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = br.ReadSlice('\n')
				over.write(chunk)
			}
			if rerr := refuse(over); rerr != nil {
				return rerr
			}
			if err != nil {
				return eofOK(err)
			}
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			if _, werr := pw.Write(line); werr != nil {
				return werr
			}
		}
		if cap(line) > 1<<20 {
			line = nil // a large buffer is not kept for small lines
		} else {
			line = line[:0]
		}
		if err != nil {
			return eofOK(err)
		}
	}
}

func eofOK(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// refuseMessage answers a message over the bound with a JSON-RPC error,
// and records it.
func (g *Gateway) refuseMessage(out io.Writer, over *oversized, limit int64) {
	id := json.RawMessage("null")
	if v := over.id.value(); v != nil {
		id = v
	}
	msg := fmt.Sprintf("cordon refused this message: it is %d bytes, more than the bound of %d bytes (session.max_argument_bytes of the profile, and %d bytes for the rest of the message); the session goes on", over.n, limit, envelopeBytes)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32600, "message": msg}})
	out.Write(append(b, '\n'))
	g.recordRefused(over, limit, id)
}

// recordRefused records a message refused for its size.
func (g *Gateway) recordRefused(over *oversized, limit int64, id json.RawMessage) {
	g.record(&session{}, audit.Event{Kind: audit.Decision, Type: "message_refused", Data: map[string]any{
		"bytes": over.n, "sha256": hex.EncodeToString(over.h.Sum(nil)), "rule": "session.max_argument_bytes", "limit": limit, "id": id,
	}})
	g.cfg.Logf("refused a message of %d bytes from the agent, more than the bound of %d bytes", over.n, limit)
}

// oversized is a message too large to keep: its size, digest and id.
type oversized struct {
	n  int64
	h  hash.Hash
	id idFinder
}

func (o *oversized) write(b []byte) {
	o.n += int64(len(b))
	o.h.Write(b)
	o.id.write(b)
}

// write feeds b, skipping quickly over the inside of strings that are not
// the id nor a member's name (where a large argument is).
func (f *idFinder) write(b []byte) {
	for i := 0; i < len(b); i++ {
		if f.inString && !f.escaped && !f.inKey && !(f.isID && f.depth == 1) {
			j := bytes.IndexAny(b[i:], `"\`)
			if j < 0 {
				return
			}
			i += j
		}
		f.feed(b[i])
	}
}

// idFinder finds the id of a JSON-RPC message as its bytes stream by,
// keeping only the id: the member "id" of the top-level object, a number
// or a string of at most idBytes.
type idFinder struct {
	depth     int
	inString  bool
	escaped   bool
	expectKey bool // the next string at depth 1 is a member's name
	inKey     bool
	key       []byte
	isID      bool // the value being read is the id's
	val       []byte
	found     []byte
}

const idBytes = 256

func (f *idFinder) feed(c byte) {
	if f.inString {
		switch {
		case f.escaped:
			f.escaped = false
		case c == '\\':
			f.escaped = true
		case c == '"':
			f.inString = false
		}
		if f.inKey {
			if f.inString && len(f.key) <= idBytes {
				f.key = append(f.key, c)
			}
			if !f.inString {
				f.inKey = false
			}
			return
		}
		if f.isID && f.depth == 1 {
			f.keep(c)
			if !f.inString {
				f.done()
			}
		}
		return
	}
	switch c {
	case '"':
		f.inString = true
		if f.depth == 1 && f.expectKey {
			f.inKey, f.key = true, f.key[:0]
		} else if f.isID && f.depth == 1 {
			f.val = append(f.val[:0], c)
		}
	case '{', '[':
		f.depth++
		if f.depth == 1 {
			f.expectKey = c == '{'
		} else if f.depth == 2 {
			f.isID = false // an id that is not a number or string
		}
	case '}', ']':
		if f.depth == 1 && f.isID {
			f.done()
		}
		f.depth--
	case ':':
		if f.depth == 1 {
			f.expectKey = false
			f.isID = string(f.key) == "id"
			f.val = f.val[:0]
		}
	case ',':
		if f.depth == 1 {
			if f.isID {
				f.done()
			}
			f.expectKey = true
		}
	case ' ', '\t', '\r', '\n':
	default:
		if f.isID && f.depth == 1 {
			f.keep(c)
		}
	}
}

func (f *idFinder) keep(c byte) {
	if len(f.val) <= idBytes {
		f.val = append(f.val, c)
	}
}

func (f *idFinder) done() {
	if f.isID && len(f.val) > 0 && len(f.val) <= idBytes && f.found == nil {
		f.found = bytes.Clone(f.val)
	}
	f.isID = false
}

// value is the id found, when it is a JSON number or string.
func (f *idFinder) value() json.RawMessage {
	var v any
	if f.found == nil || json.Unmarshal(f.found, &v) != nil {
		return nil
	}
	switch v.(type) {
	case float64, string:
		return json.RawMessage(f.found)
	}
	return nil
}
