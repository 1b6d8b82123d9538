// Package termsafe makes text that a sandbox chose safe to print on the
// operator's terminal and in logs: a host name from a SOCKS5 request, a
// tool's name or description, a line of a tool server's output, a file name
// found in a workspace. Control characters (an escape sequence can rewrite
// the screen, retitle the window, hide text or forge a line that looks like
// cordon's), and invisible format characters (among them the Unicode
// bidirectional controls U+202A-U+202E, U+2066-U+2069, U+200E, U+200F and
// U+061C, which reorder what is shown), are shown as Go escapes, invalid
// UTF-8 as bytes. A Stream carries a sandbox's output and cordon's own
// lines on one of cordon's streams, each of cordon's on a line of its own.
package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxLine is the most of one piece of text Line keeps, in bytes of input.
const MaxLine = 1024

// Line returns s on one line: every control or invalid character escaped
// (line feeds too) and at most MaxLine bytes of it kept ("..." marks the
// cut). Printable text, spaces included, is left as it is.
func Line(s string) string {
	cut := false
	if len(s) > MaxLine {
		s, cut = s[:MaxLine], true
	}
	s = escape(s, false)
	if cut {
		s += "..."
	}
	return s
}

// Text is s with every control or invalid character escaped as Line does,
// except line feeds and tabs, which it keeps: for text of many lines shown
// whole, such as a tool's description an operator reviews. Nothing is cut.
func Text(s string) string { return escape(s, true) }

// HasControl reports whether s holds a character that Text escapes.
func HasControl(s string) bool { return escape(s, true) != s }

// escape writes s with its control and invalid characters as escapes;
// keepLines keeps line feeds and tabs.
func escape(s string, keepLines bool) string {
	if clean(s, keepLines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case printable(r, keepLines):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// JSON returns the JSON text b with every character that Line escapes
// written as a JSON \u escape instead: the same JSON value, safe to print.
// Line feeds between values are kept (inside a string, encoding/json
// escapes them already); b is expected to be valid UTF-8, as encoding/json
// writes it.
func JSON(b []byte) []byte {
	if clean(string(b), true) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r != utf8.RuneError && printable(r, true):
			out = append(out, b[i:i+n]...)
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		default:
			for _, u := range utf16.Encode([]rune{r}) {
				out = append(out, fmt.Sprintf(`\u%04x`, u)...)
			}
		}
		i += n
	}
	return out
}

func printable(r rune, keepLines bool) bool {
	return unicode.IsPrint(r) || r == ' ' || keepLines && (r == '\n' || r == '\t')
}

func clean(s string, keepLines bool) bool {
	for _, r := range s {
		if r == utf8.RuneError || !printable(r, keepLines) {
			return false
		}
	}
	return true
}
