package pathglob

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Rule names files as a profile's label rules do: a glob (MatchFile), a
// prefix of the name (from the workspace when relative) and a suffix;
// empty parts match anything.
type Rule struct {
	Glob   string `json:"glob,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Suffix string `json:"suffix,omitempty"`
}

// MatchRule matches the absolute, resolved path p of a file in workspace ws
// against r. Names are compared in Unicode normal form C: a name and its
// decomposed spelling name one file for the tools that open it.
func MatchRule(r Rule, p, ws string) bool {
	return r.NFC().MatchNFC(norm.NFC.String(p), norm.NFC.String(ws))
}

// NFC is r with its names in Unicode normal form C.
func (r Rule) NFC() Rule {
	return Rule{Glob: norm.NFC.String(r.Glob), Prefix: norm.NFC.String(r.Prefix), Suffix: norm.NFC.String(r.Suffix)}
}

// MatchNFC is MatchRule for a rule, a path and a workspace already in
// normal form C.
func (r Rule) MatchNFC(p, ws string) bool {
	if r.Glob != "" && !MatchFile(r.Glob, p, ws) {
		return false
	}
	if r.Prefix != "" {
		name := p
		if !strings.HasPrefix(r.Prefix, "/") {
			rel, ok := Within(p, ws)
			if !ok {
				return false
			}
			name = rel
		}
		if !strings.HasPrefix(name, r.Prefix) {
			return false
		}
	}
	return strings.HasSuffix(p, r.Suffix)
}
