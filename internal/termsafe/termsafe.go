// Package termsafe makes text that a sandbox chose safe to print on the
// operator's terminal and in logs: a host name from a SOCKS5 request, a
// tool's name, a line of a tool server's output. Control characters (an
// escape sequence can rewrite the screen, retitle the window or forge a
// line that looks like cordon's) are shown as Go escapes, invalid UTF-8 as
// bytes, and the text is cut to a bounded length.
package termsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLine is the most of one piece of text Line keeps, in bytes of input.
const MaxLine = 1024

// Line returns s with every control or invalid character escaped and at
// most MaxLine bytes of it kept ("..." marks the cut). Printable text,
// spaces included, is left as it is.
func Line(s string) string {
	cut := false
	if len(s) > MaxLine {
		s, cut = s[:MaxLine], true
	}
	if clean(s) && !cut {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case unicode.IsPrint(r) || r == ' ':
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	if cut {
		b.WriteString("...")
	}
	return b.String()
}

func clean(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !(unicode.IsPrint(r) || r == ' ') {
			return false
		}
	}
	return true
}
