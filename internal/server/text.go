package server

import (
	"bufio"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/bufpool"
)

// The API answers a command's output as base64, and beside it as text
// (stdout_text, stderr_text) when the bytes are valid UTF-8. A streamed
// command's pieces are cut at whole characters (see streamWriter), so that
// each piece of UTF-8 output is text on its own.

// incompleteTail is how many bytes at the end of b begin a UTF-8 sequence
// that b does not finish (0 to 3): what is held back for the next piece.
func incompleteTail(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if seqLen(c) > i {
				return i
			}
			return 0
		}
	}
	return 0
}

// seqLen is the length of the UTF-8 sequence that c begins, 1 when c
// begins none.
func seqLen(c byte) int {
	switch {
	case c >= 0xF0 && c <= 0xF4:
		return 4
	case c >= 0xE0 && c < 0xF0:
		return 3
	case c >= 0xC2 && c < 0xE0:
		return 2
	}
	return 1
}

// utf8Check says whether a stream given in pieces is valid UTF-8 as a
// whole, a character possibly split between pieces.
type utf8Check struct {
	bad  bool
	tail []byte // the start of a character the next piece goes on with
}

func (v *utf8Check) feed(p []byte) {
	if v.bad || len(p) == 0 {
		return
	}
	if len(v.tail) > 0 {
		take := min(seqLen(v.tail[0])-len(v.tail), len(p))
		v.tail, p = append(v.tail, p[:take]...), p[take:]
		if len(v.tail) < seqLen(v.tail[0]) {
			return
		}
		if !utf8.Valid(v.tail) {
			v.bad = true
			return
		}
		v.tail = v.tail[:0]
	}
	n := incompleteTail(p)
	if !utf8.Valid(p[:len(p)-n]) {
		v.bad = true
		return
	}
	v.tail = append(v.tail, p[len(p)-n:]...)
}

// valid reports whether everything fed was valid UTF-8.
func (v *utf8Check) valid() bool { return !v.bad && len(v.tail) == 0 }

// copyJSONText writes r, valid UTF-8, to w as the inside of a JSON string,
// and reports whether the client still takes it (as copyBase64).
func copyJSONText(w *bufio.Writer, r io.Reader, g *sendGuard) bool {
	const hex = "0123456789abcdef"
	b := bufpool.Get()
	defer bufpool.Put(b)
	buf := b[:]
	for !g.failed.Load() {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			switch {
			case c == '"' || c == '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case c == '\n':
				w.WriteString(`\n`)
			case c == '\r':
				w.WriteString(`\r`)
			case c == '\t':
				w.WriteString(`\t`)
			case c < 0x20:
				w.WriteString(`\u00`)
				w.WriteByte(hex[c>>4])
				w.WriteByte(hex[c&0xF])
			default:
				w.WriteByte(c)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false
		}
	}
	return !g.failed.Load()
}
