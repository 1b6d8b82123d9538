// Package termsafe makes text that a sandbox chose safe to print on the
// operator's terminal and in logs: a host name from a SOCKS5 request, a
// tool's name or description, a line of a tool server's output, a file name
// found in a workspace. Control characters (an escape sequence can rewrite
// the screen, retitle the window, hide text or forge a line that looks like
// cordon's) are shown as Go escapes, invalid UTF-8 as bytes.
package termsafe

import (
	"strconv"
	"strings"
	"unicode"
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
