package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// maxDiff is the most of a file, old or new, that Diff shows line by line:
// a larger one is summarised.
const maxDiff = LargeSize

// Diff writes the changes of s that paths select (as Select does) to w as
// a unified diff with git's headers: a/ and b/ paths, "new file mode",
// "deleted file mode", "old mode"/"new mode", a link shown as its target,
// "Binary files ... differ" for binary content; a file over 1 MiB is
// summarised; special files and directories get their headers only. The
// old side is read from the host workspace (no link followed), the new
// from the set's blobs in dir. Names and lines are made safe for a
// terminal (termsafe), so the output is for reading, not for patch.
func Diff(w io.Writer, s *Set, dir string, paths []string) error {
	rd, err := runDir(dir, s.Run)
	if err != nil {
		return err
	}
	sel, err := s.Select(paths)
	if err != nil {
		return fmt.Errorf("diff %s: %w", s.Run, err)
	}
	root, err := openRoot(s.Workspace)
	if err != nil {
		return fmt.Errorf("diff %s: workspace: %w", s.Run, err)
	}
	defer root.Close()
	for _, c := range sel {
		if err := diffOne(w, root, filepath.Join(rd, blobDir), c); err != nil {
			return fmt.Errorf("diff %s: %q: %w", s.Run, c.Path, err)
		}
	}
	return nil
}

// gitMode is the mode git shows for a type and permission bits.
func gitMode(typ string, mode uint32) string {
	switch typ {
	case TypeDir:
		return fmt.Sprintf("%06o", unix.S_IFDIR|mode)
	case TypeSymlink:
		return "120000"
	case TypeSpecial:
		return fmt.Sprintf("%06o", mode) + " (special)"
	}
	return fmt.Sprintf("%06o", unix.S_IFREG|mode)
}

func diffOne(w io.Writer, root *os.File, blobs string, c Change) error {
	p := termsafe.Line(c.Path)
	a, b := "a/"+p, "b/"+p
	fmt.Fprintf(w, "diff --git %s %s\n", a, b)
	switch c.Kind {
	case Added:
		a = "/dev/null"
		fmt.Fprintf(w, "new file mode %s\n", gitMode(c.Type, c.Mode))
	case Deleted:
		b = "/dev/null"
		fmt.Fprintf(w, "deleted file mode %s\n", gitMode(c.Type, c.Mode))
	default:
		if c.Mode != c.OldMode {
			fmt.Fprintf(w, "old mode %s\nnew mode %s\n", gitMode(c.OldType, c.OldMode), gitMode(c.Type, c.Mode))
		}
	}
	var old, new string
	switch {
	case c.Type == TypeSymlink:
		old, new = c.OldTarget, c.Target
	case c.Type != TypeFile:
		return nil
	case c.Kind == Modified && c.SHA256 == c.OldSHA256:
		return nil // the mode alone
	case c.Kind != Added && c.OldSize > maxDiff, c.Kind != Deleted && c.Size > maxDiff:
		_, err := fmt.Fprintf(w, "Large file not shown (%d bytes, was %d)\n", c.Size, c.OldSize)
		return err
	default:
		var err error
		if c.Kind != Added {
			if old, err = hostContent(w, root, c); err != nil {
				return err
			}
		}
		if c.Kind != Deleted {
			data, err := readFile(filepath.Join(blobs, c.SHA256), maxDiff)
			if err != nil {
				return err
			}
			new = string(data)
		}
		if looksBinary(old) || looksBinary(new) {
			_, err := fmt.Fprintf(w, "Binary files %s and %s differ\n", a, b)
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "--- %s\n+++ %s\n", a, b); err != nil {
		return err
	}
	if c.Type == TypeSymlink {
		// A link's text, as git shows it, without a line feed.
		old, new = noNewline(old), noNewline(new)
	}
	return unified(w, splitLines(old), splitLines(new), 3)
}

// noNewline makes a link's text one line without a final line feed.
func noNewline(s string) string {
	if s == "" {
		return s
	}
	return termsafe.Line(s)
}

// hostContent reads the host's file c.Path, noting on w when it is no
// longer what Capture saw.
func hostContent(w io.Writer, root *os.File, c Change) (string, error) {
	f, st, err := openFileAt(root, c.Path)
	if err != nil {
		fmt.Fprintf(w, "# the host's file cannot be read now (%v): shown as empty\n", err)
		return "", nil
	}
	defer f.Close()
	if st.Size > maxDiff {
		fmt.Fprintf(w, "# the host's file has changed since the capture (%d bytes): shown as empty\n", st.Size)
		return "", nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDiff))
	if err != nil {
		return "", err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != c.OldSHA256 {
		fmt.Fprintf(w, "# the host's file has changed since the capture\n")
	}
	return string(data), nil
}

// looksBinary reports whether content is binary: a NUL in its first 8000
// bytes, or not UTF-8.
func looksBinary(s string) bool {
	sn := &sniffer{}
	sn.Write([]byte(s))
	return sn.binary()
}
