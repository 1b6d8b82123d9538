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
	for _, name := range strings.Split(strings.TrimPrefix(pattern, "/"), "/") {
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
	return match(strings.Split(strings.TrimPrefix(pattern, "/"), "/"), strings.Split(strings.TrimPrefix(name, "/"), "/"))
}

func match(pat, names []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// The shortest run of names first; every length is tried.
			for i := 0; i <= len(names); i++ {
				if match(pat[1:], names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
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
	if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
		return rel, true
	}
	return "", false
}
