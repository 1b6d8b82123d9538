// Package pathglob matches resolved file paths against glob patterns, as a
// profile's label rules and path constraints name files: each name of the
// pattern is matched against one name of the path (path.Match: *, ?,
// [class]; a leading dot is matched like any character), and a name that
// is exactly ** matches any number of names, none included. A relative
// pattern is matched against the path relative to the workspace; an
// absolute one against the absolute path.
package pathglob

import (
	"fmt"
	"path"
	"strings"
)

// Check says why pattern is not a glob: empty, not clean (".", "..", a
// doubled or trailing slash), a name with ** beside other characters, or
// a malformed class.
func Check(pattern string) error {
	switch {
	case pattern == "":
		return fmt.Errorf("empty pattern")
	case pattern != "/" && path.Clean(pattern) != pattern:
		return fmt.Errorf("%q is not a clean path pattern (no \".\", \"..\", doubled or trailing slash)", pattern)
	}
	for names := split(strings.TrimPrefix(pattern, "/")); names.more; {
		var name string
		name, names = names.next()
		if name == "**" {
			continue
		}
		if strings.Contains(name, "**") {
			return fmt.Errorf("%q: ** matches whole names only (write a/**/b, not a**b)", pattern)
		}
		if _, err := path.Match(name, ""); err != nil {
			return fmt.Errorf("%q: %q is not a valid pattern (%v)", pattern, name, err)
		}
	}
	return nil
}

// Match reports whether the clean slash-separated name matches pattern
// (both relative, or both absolute). A pattern Check refuses matches
// nothing.
func Match(pattern, name string) bool {
	if Check(pattern) != nil || strings.HasPrefix(pattern, "/") != strings.HasPrefix(name, "/") {
		return false
	}
	return match(split(strings.TrimPrefix(pattern, "/")), split(strings.TrimPrefix(name, "/")))
}

// seq walks the names of a slash-separated string as strings.Split gives
// them ("" is one empty name), without allocating.
type seq struct {
	rest string
	more bool // whether a name is left
}

func split(s string) seq { return seq{rest: s, more: true} }

// next is the first name left and the names after it.
func (q seq) next() (string, seq) {
	first, rest, found := strings.Cut(q.rest, "/")
	return first, seq{rest: rest, more: found}
}

func match(pat, names seq) bool {
	for pat.more {
		var p string
		p, pat = pat.next()
		if p == "**" {
			// The shortest run of names first; every length is tried.
			for {
				if match(pat, names) {
					return true
				}
				if !names.more {
					return false
				}
				_, names = names.next()
			}
		}
		if !names.more {
			return false
		}
		var n string
		n, names = names.next()
		if ok, _ := path.Match(p, n); !ok {
			return false
		}
	}
	return !names.more
}

// MatchFile matches the absolute, resolved path p of a file against
// pattern: an absolute pattern against p, a relative one against p
// relative to the workspace ws. A file outside the workspace matches a
// relative pattern only when the pattern starts with ** (which may stand
// for any directory, the workspace's parents included), against its whole
// path.
func MatchFile(pattern, p, ws string) bool {
	if strings.HasPrefix(pattern, "/") {
		return Match(pattern, p)
	}
	if rel, ok := Within(p, ws); ok && rel != "" {
		if Match(pattern, rel) {
			return true
		}
	}
	if strings.HasPrefix(pattern, "**") && p != "/" {
		return Match(pattern, strings.TrimPrefix(p, "/"))
	}
	return false
}

// Within reports whether the absolute path p is dir or under it, and p
// relative to dir ("" for dir itself). Both are clean absolute paths.
func Within(p, dir string) (string, bool) {
	if dir == "" || !strings.HasPrefix(p, "/") {
		return "", false
	}
	if p == dir {
		return "", true
	}
	if dir == "/" {
		return p[1:], true
	}
	if len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir) {
		return p[len(dir)+1:], true
	}
	return "", false
}
