package egress

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxShownName is the most bytes of a name the sandbox chose that a reason
// or an event shows.
const maxShownName = 255

// RawNames keeps names as the sandbox sent them; only test builds set it,
// to show that the escape probe for it can fail.
var RawNames bool

// safeName returns a name the sandbox chose (a requested host, a TLS server
// name, an HTTP Host) fit for a reason or an event, which reach the
// operator's terminal and the audit log: control characters, bytes that are
// not UTF-8 and other unprintable runes are written as \xNN, \uNNNN or
// \UNNNNNNNN, backslashes and double quotes are escaped, and the result is at
// most maxShownName bytes, "..." marking where it was cut. Every name the
// sandbox chose goes through it before it enters a reason or an event.
func safeName(s string) string {
	if RawNames || len(s) <= maxShownName && plain(s) {
		return s
	}
	const more = "..."
	var b strings.Builder
	cut := -1
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\\' || r == '"':
			piece = `\` + string(r)
		case r < utf8.RuneSelf && !unicode.IsPrint(r):
			piece = fmt.Sprintf(`\x%02x`, r)
		case !unicode.IsPrint(r) && r <= 0xffff:
			piece = fmt.Sprintf(`\u%04x`, r)
		case !unicode.IsPrint(r):
			piece = fmt.Sprintf(`\U%08x`, r)
		default:
			piece = s[i : i+size]
		}
		i += size
		if cut < 0 && b.Len()+len(piece) > maxShownName-len(more) {
			cut = b.Len()
		}
		if b.Len()+len(piece) > maxShownName {
			return b.String()[:cut] + more
		}
		b.WriteString(piece)
	}
	return b.String()
}

// plain reports whether s is printable ASCII without backslashes or
// double quotes, which safeName leaves as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

// validName reports whether host is a DNS name a client may ask for: at most
// 253 bytes (a final dot aside), labels of 1 to 63 letters, digits, hyphens
// and underscores. Other names are refused before any rule or lookup sees
// them.
func validName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
