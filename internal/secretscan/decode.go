package secretscan

import (
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// What agents and shells make of a credential to move it past a scanner
// is read back: hex (xxd -p, od), percent-encoding (a URL's query),
// base32, \u and \x escapes (printf, a JSON or Python string), a
// separator put between its characters ("g h p _ ...", "g-h-p-_-..."), and
// its pieces printed apart (two or three words of a token's characters,
// each with a digit, with only white space between them). A
// run of text in one of these forms is decoded once and scanned (what it
// decodes to is not decoded again); a credential found reports the whole
// run, by the rule "FORM:" and the inner rule. Each decoder reads each
// byte of the text a bounded number of times, and what it scans is no
// longer than the run it read.

// minDecoded is the shortest decoded text scanned: a credential with its
// name is longer.
const minDecoded = 16

// decoder finds the runs of one form in s and decodes each.
type decoder struct {
	form string
	runs func(s string, yield func(start, end int, decoded []byte))
}

var decoders = []decoder{
	{"hex", hexRuns},
	{"percent", percentRuns},
	{"base32", base32Runs},
	{"escapes", escapeRuns},
	{"spaced", spacedRuns},
	{"joined", joinedRuns},
}

// decoded scans the runs of every form in s, adding what is found.
func decoded(s string, add func(rule string, start, end int) bool) bool {
	for _, d := range decoders {
		stop := false
		d.runs(s, func(start, end int, b []byte) {
			if stop || len(b) < minDecoded || !readable(b) {
				return
			}
			fs := scan(b, 1, false)
			// Words joined look random as often as not: only a known
			// format found in them is one.
			if len(fs) > 0 && !(d.form == "joined" && fs[0].Rule == "high-entropy-token") {
				stop = add(d.form+":"+fs[0].Rule, start, end)
			}
		})
		if stop {
			return true
		}
	}
	return false
}

// readable says whether b is mostly printable ASCII.
func readable(b []byte) bool {
	printable := 0
	for _, c := range b {
		if c == '\n' || c == '\t' || c == '\r' || (c >= 0x20 && c < 0x7f) {
			printable++
		}
	}
	return printable*100 >= len(b)*95
}

// byteSet is a set of bytes.
type byteSet [256]bool

func setOf(chars string) (t byteSet) {
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = true
	}
	return t
}

const (
	alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

var (
	hexSet    = setOf("0123456789abcdefABCDEF")
	urlSet    = setOf(alnum + "%-._~+=&/:")
	base32Set = setOf("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ234567=")
	wordSet   = setOf(alnum + "_-")
)

// runsOf calls yield with each maximal run of s of bytes in set, at least
// min long.
func runsOf(s string, set *byteSet, min int, yield func(start, end int)) {
	for i := 0; i < len(s); {
		if !set[s[i]] {
			i++
			continue
		}
		j := i
		for j < len(s) && set[s[j]] {
			j++
		}
		if j-i >= min {
			yield(i, j)
		}
		i = j
	}
}

func isHex(c byte) bool { return hexSet[c] }

// hexRuns are runs of hex digits, decoded (an odd last digit dropped).
func hexRuns(s string, yield func(int, int, []byte)) {
	runsOf(s, &hexSet, 2*minDecoded, func(i, j int) {
		r := s[i:j]
		b, err := hex.DecodeString(r[:len(r)&^1])
		if err == nil {
			yield(i, j, b)
		}
	})
}

// percentRuns are runs of a URL's characters holding %XX escapes,
// unescaped.
func percentRuns(s string, yield func(int, int, []byte)) {
	runsOf(s, &urlSet, minDecoded, func(i, j int) {
		r := s[i:j]
		if strings.Count(r, "%") < 4 {
			return
		}
		b := make([]byte, 0, len(r))
		for k := 0; k < len(r); k++ {
			if r[k] == '%' && k+2 < len(r) && isHex(r[k+1]) && isHex(r[k+2]) {
				v, _ := hex.DecodeString(r[k+1 : k+3])
				b = append(b, v[0])
				k += 2
				continue
			}
			b = append(b, r[k])
		}
		yield(i, j, b)
	})
}

// rawBase32 is base32 without its padding, which runs have stripped.
var rawBase32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// base32Runs are runs of base32 (either case, padded or not), decoded.
func base32Runs(s string, yield func(int, int, []byte)) {
	runsOf(s, &base32Set, 32, func(i, j int) {
		r := strings.ToUpper(strings.TrimRight(s[i:j], "="))
		// A token cut out of a longer one may not end on a boundary.
		for cut := 0; cut < 8 && cut < len(r); cut++ {
			if b, err := rawBase32.DecodeString(r[:len(r)-cut]); err == nil {
				yield(i, j, b)
				return
			}
		}
	})
}

// escapeRuns are runs of \uXXXX and \xXX escapes (and what lies between
// them), unescaped.
func escapeRuns(s string, yield func(int, int, []byte)) {
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], `\`)
		if k < 0 {
			return
		}
		start := i + k
		var b []byte
		j, escapes := start, 0
		for j < len(s) {
			switch {
			case j+6 <= len(s) && s[j] == '\\' && s[j+1] == 'u' && isHex(s[j+2]) && isHex(s[j+3]) && isHex(s[j+4]) && isHex(s[j+5]):
				v, _ := hex.DecodeString(s[j+2 : j+6])
				r := rune(v[0])<<8 | rune(v[1])
				b, j, escapes = append(b, string(r)...), j+6, escapes+1
				continue
			case j+4 <= len(s) && s[j] == '\\' && s[j+1] == 'x' && isHex(s[j+2]) && isHex(s[j+3]):
				v, _ := hex.DecodeString(s[j+2 : j+4])
				b, j, escapes = append(b, v[0]), j+4, escapes+1
				continue
			case s[j] > ' ' && s[j] < 0x7f && s[j] != '\\' && s[j] != '"' && s[j] != '\'' && escapes > 0:
				b, j = append(b, s[j]), j+1
				continue
			}
			break
		}
		if escapes >= 4 {
			yield(start, j, b)
		}
		i = max(j, start+1)
	}
}

// spacedRuns are runs of single characters each followed by the same
// separator (a space, or one of -.,:|_/), with the separators dropped:
// "g h p _ 1 2" is "ghp_12".
func spacedRuns(s string, yield func(int, int, []byte)) {
	word := func(c byte) bool { return wordSet[c] }
	for i := 0; i+1 < len(s); {
		sep := s[i+1]
		if !word(s[i]) || strings.IndexByte(" -.,:|_/", sep) < 0 || sep == s[i] {
			i++
			continue
		}
		var b []byte
		j := i
		for j+1 < len(s) && word(s[j]) && s[j+1] == sep && s[j] != sep {
			b = append(b, s[j])
			j += 2
		}
		if j < len(s) && word(s[j]) && s[j] != sep {
			b = append(b, s[j])
			j++
		}
		if len(b) >= minDecoded && (j >= len(s) || !word(s[j])) {
			yield(i, j, b)
		}
		i = max(j, i+1)
	}
}

// joinedRuns are two and three words in a row made of a token's
// characters, each with a letter and a digit, apart only by white space,
// joined: a token printed in pieces ("${T:0:20}" and "${T:20}").
func joinedRuns(s string, yield func(int, int, []byte)) {
	type word struct {
		start, end int
		begins     bool // it holds a keyword of a known format: one may begin in it
	}
	var last []word // the words in a row so far, at most three
	tokenLike := func(w string) bool {
		return len(w) >= 4 && strings.ContainsAny(w, "0123456789") && strings.ContainsFunc(w, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' })
	}
	space := func(from, to int) bool {
		for k := from; k < to; k++ {
			if c := s[k]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return false
			}
		}
		return true
	}
	runsOf(s, &tokenChars, 4, func(i, j int) {
		if !tokenLike(s[i:j]) {
			last = last[:0]
			return
		}
		if n := len(last); n > 0 && !space(last[n-1].end, i) {
			last = last[:0]
		}
		last = append(last, word{i, j, hasKeyword(s[i:j])})
		if len(last) > 3 {
			last = last[1:]
		}
		for k := len(last) - 2; k >= 0; k-- {
			if !last[k].begins {
				continue // only a known format is looked for in joined words
			}
			var b []byte
			for _, w := range last[k:] {
				b = append(b, s[w.start:w.end]...)
			}
			yield(last[k].start, j, b)
		}
	})
}
