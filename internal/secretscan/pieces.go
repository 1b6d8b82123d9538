package secretscan

import (
	"slices"
	"strings"
	"sync"
)

// A credential printed in pieces, one result after another ("${T:0:20}",
// then another call, then "${T:20}"), is found as the pieces arrive: a
// word that holds the keyword of a known format is kept open, and each
// later word is tried after it. What they make together is scanned for a
// known format (a random-looking join is not taken for one).

// Bounds of what Pieces keeps and tries, whatever the texts hold.
const (
	maxOpen       = 16  // pieces kept open
	maxPieceLen   = 160 // bytes of an open piece
	maxWordsTried = 64  // words of a text tried after the open pieces
)

// Pieces returns the rules of the known formats that the pieces still
// open (from earlier texts) and the words of text make together, and the
// pieces to keep open for the next text: the open ones, each grown by the
// first word of text too (a credential in three pieces), and the words of
// text that may begin one, the oldest dropped past maxOpen.
func Pieces(open []string, text []byte) (rules []string, keep []string) {
	words := wordsOf(string(text), maxWordsTried)
	var grown []string
	for _, p := range open {
		for i, w := range words {
			j := p + w
			if r, ok := knownFormat(j); ok {
				if !slices.Contains(rules, "pieces:"+r) {
					rules = append(rules, "pieces:"+r)
				}
			} else if i == 0 && len(j) <= maxPieceLen {
				grown = append(grown, j)
			}
		}
	}
	keep = append(append([]string(nil), open...), grown...)
	// What may begin a credential of a known format opens a piece.
	for _, w := range words {
		if hasKeyword(w) {
			keep = append(keep, w)
		}
	}
	if len(keep) > maxOpen {
		keep = keep[len(keep)-maxOpen:]
	}
	return rules, keep
}

// wordsOf are the first max runs of a token's characters in s, at least
// four long and at most maxPieceLen.
func wordsOf(s string, max int) []string {
	var out []string
	runsOf(s, &tokenChars, 4, func(i, j int) {
		if len(out) < max && j-i <= maxPieceLen {
			out = append(out, s[i:j])
		}
	})
	return out
}

// hasKeyword says whether w holds a keyword of a known format.
func hasKeyword(w string) bool {
	kw := keywords()
	for i := 0; i+1 < len(w); i++ {
		pair := [2]byte{lowerByte(w[i]), lowerByte(w[i+1])}
		for _, k := range kw[pair] {
			if len(w)-i >= len(k) && strings.EqualFold(w[i:i+len(k)], k) {
				return true
			}
		}
	}
	return false
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// keywords are the known formats' keywords by their first two bytes.
var keywords = sync.OnceValue(func() map[[2]byte][]string {
	m := map[[2]byte][]string{}
	for _, r := range rules() {
		for _, k := range r.keywords {
			if len(k) >= 2 {
				pair := [2]byte{k[0], k[1]}
				m[pair] = append(m[pair], k)
			}
		}
	}
	return m
})

// knownFormat is the rule of a known format s holds.
func knownFormat(s string) (string, bool) {
	for _, f := range scan([]byte(s), MaxFindings, false) {
		if f.Rule != "high-entropy-token" && f.Rule != "generic-credential" {
			return f.Rule, true
		}
	}
	return "", false
}
