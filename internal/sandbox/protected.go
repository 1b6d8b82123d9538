package sandbox

import (
	"github.com/cordon-sandbox/cordon/internal/protect"

	"bytes"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// SensitiveRefusal is why a workspace or writable bind that is a home
// directory, or holds one or a store of credentials, is refused, and what
// to do: cordon run's early check says it as the sandbox's build does.
const SensitiveRefusal = "the sandbox could read it (keys, credentials), and change what it may write; choose a project directory, or set workspace.allow_sensitive in the profile to accept that"

// protectedPath is a protected path of a writable bind: how the profile
// names it (workspace.unprotect) and where the sandbox sees it.
type protectedPath struct {
	rel  string // relative to the bind's root
	view string // absolute, inside
	// readOnly: read-only throughout, so that a path beneath it is as
	// protected; a directory only pinned in place is protected from being
	// renamed or removed, not what is beneath it.
	readOnly bool
}

// protectedPaths lists the protected paths of the spec's writable binds,
// for a failure's message to be recognised by: all but the guarded files
// (the profile, its approval record, cordon's configuration), which no
// profile opens.
func (s *Spec) protectedPaths(guard []string) []protectedPath {
	var out []protectedPath
	for _, m := range s.Mounts {
		for _, e := range m.Protect {
			if slices.Contains(guard, filepath.Join(m.Source, e.Rel)) {
				continue
			}
			out = append(out, protectedPath{rel: e.Rel, view: path.Join(m.Target, e.Rel), readOnly: e.ReadOnly})
		}
	}
	return out
}

// protectedName is a protected path as the sandbox's messages name it:
// absolute, or relative to the command's working directory.
type protectedName struct {
	rel      string
	names    []string
	readOnly bool
}

// protectedNames are the names of paths as a command started in workdir
// would give them.
func protectedNames(paths []protectedPath, workdir string) []protectedName {
	var out []protectedName
	for _, p := range paths {
		n := protectedName{rel: p.rel, names: []string{p.view}, readOnly: p.readOnly}
		if rel, err := filepath.Rel(workdir, p.view); err == nil && rel != "." {
			n.names = append(n.names, rel)
			if !strings.HasPrefix(rel, "../") {
				n.names = append(n.names, "./"+rel)
			}
		}
		out = append(out, n)
	}
	return out
}

// refusals are the C library's words for what a protected path answers a
// write, a rename or a removal with (EROFS, EBUSY for a mount point,
// EACCES, EPERM), without their first letter: Go and Node write them in
// lower case.
var refusals = [][]byte{[]byte("ead-only file system"), []byte("evice or resource busy"), []byte("ermission denied"), []byte("peration not permitted")}

// maxNamed bounds the protected paths one run's message names.
const maxNamed = 3

// maxLine bounds the part of a line of standard error that is read for a
// protected path's name.
const maxLine = 4096

// sawLine records the protected paths that a line of standard error names
// together with a refusal; c.mu is held.
func (c *outputCap) sawLine(line []byte) {
	if len(c.named) == maxNamed {
		return
	}
	if bytes.Contains(line, []byte(protect.RootGitdir)) {
		// git stopped at the placeholder of a root's .git.
		for _, p := range c.protected {
			if p.rel == ".git" && !slices.Contains(c.named, p.rel) {
				c.named = append(c.named, p.rel)
			}
		}
		return
	}
	if !refused(line) {
		return
	}
	for _, p := range c.protected {
		if slices.Contains(c.named, p.rel) {
			continue
		}
		for _, n := range p.names {
			if namesPath(line, n, p.readOnly) {
				c.named = append(c.named, p.rel)
				break
			}
		}
		if len(c.named) == maxNamed {
			return
		}
	}
}

// refused reports whether line holds one of the refusals.
func refused(line []byte) bool {
	for _, r := range refusals {
		if bytes.Contains(line, r) {
			return true
		}
	}
	return false
}

// namesPath reports whether line names the path name as a path of its
// own (not the end of a longer one, as .git is of sub/.git, nor the start
// of another name, as .git is of .gitmodules), or, when beneath counts, a
// path beneath it.
func namesPath(line []byte, name string, beneath bool) bool {
	for off := 0; ; {
		i := bytes.Index(line[off:], []byte(name))
		if i < 0 {
			return false
		}
		i += off
		if (i == 0 || !nameByte(line[i-1])) && endsName(line[i+len(name):], beneath) {
			return true
		}
		off = i + 1
	}
}

// endsName reports whether rest, what follows a path in a line, ends it:
// nothing, a character no name has, a full stop that ends a sentence, a
// slash with nothing after it, or, when beneath counts, any slash.
func endsName(rest []byte, beneath bool) bool {
	switch {
	case len(rest) == 0:
		return true
	case rest[0] == '/':
		return beneath || len(rest) == 1 || !nameByte(rest[1])
	case rest[0] == '.':
		return len(rest) == 1 || !nameByte(rest[1])
	}
	return !nameByte(rest[0])
}

// nameByte reports whether b is one of the bytes a path is made of, as
// messages print them.
func nameByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("._-/+@~%", b) >= 0 || b >= 0x80
}
