package changes

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// maxDiffed is the largest file whose content Diff shows; a larger one, or
// one that is not text, is summarised.
const maxDiffed = 1 << 20

// Diff writes a unified diff (git's headers) of the selected changes of s:
// the old side read from the host's workspace as it is now, the new from
// the set. Names and link texts are shown escaped; content as it is,
// unless a line holds a control character, when the file counts as binary.
func Diff(w io.Writer, s *Set, dir string, paths []string) error {
	sel, err := s.Select(paths)
	if err != nil {
		return err
	}
	root, err := openRoot(s.Workspace)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	for _, c := range sel {
		name := termsafe.Line(c.Path)
		fmt.Fprintf(w, "diff --cordon a/%s b/%s\n", name, name)
		switch {
		case c.Kind == Added && c.Type != Dir:
			fmt.Fprintf(w, "new file mode %s\n", gitMode(c.Type, c.Mode))
		case c.Kind == Deleted && c.OldType == Dir:
			fmt.Fprintf(w, "deleted directory mode %04o\n", c.OldMode)
		case c.Kind == Deleted:
			fmt.Fprintf(w, "deleted file mode %s\n", gitMode(c.OldType, c.OldMode))
		case c.Type == Dir:
			if c.Kind == Added {
				fmt.Fprintf(w, "new directory mode %04o\n", c.Mode)
			} else {
				fmt.Fprintf(w, "old mode %04o\nnew mode %04o\n", c.OldMode, c.Mode)
			}
		case c.OldMode != c.Mode:
			fmt.Fprintf(w, "old mode %s\nnew mode %s\n", gitMode(c.OldType, c.OldMode), gitMode(c.Type, c.Mode))
		}
		if len(c.Flags) > 0 {
			fmt.Fprintf(w, "# %s\n", strings.Join(c.Flags, ", "))
		}
		if c.Type == Dir || c.Type == Special || (c.Kind == Deleted && c.OldType == Dir) {
			continue
		}
		var old, cur string
		var oldOK, newOK bool = true, true
		switch {
		case c.Kind == Added:
		case c.OldType == Symlink:
			old = c.OldTarget + "\n"
		default:
			old, oldOK = hostText(root, c.Path, c.OldSize)
		}
		switch {
		case c.Kind == Deleted:
		case c.Type == Symlink:
			cur = c.Target + "\n"
		case c.OldType == File && c.OldSHA256 == c.SHA256:
			continue // a mode change only
		default:
			cur, newOK = blobText(filepath.Join(dir, s.Run, blobDir, c.SHA256), c.Size)
		}
		if !oldOK || !newOK {
			fmt.Fprintf(w, "Binary or large files a/%s and b/%s differ\n", name, name)
			continue
		}
		from, to := "a/"+name, "b/"+name
		if c.Kind == Added {
			from = "/dev/null"
		}
		if c.Kind == Deleted {
			to = "/dev/null"
		}
		fmt.Fprint(w, udiff.Unified(from, to, old, cur))
	}
	return nil
}

func gitMode(typ string, mode uint32) string {
	if typ == Symlink {
		return "120000"
	}
	return fmt.Sprintf("100%03o", mode&0o777)
}

// hostText reads the host's file rel as text, when it is text and small.
func hostText(root int, rel string, size int64) (string, bool) {
	if size > maxDiffed {
		return "", false
	}
	fd, err := openLower(root, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return "", false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return readText(f)
}

func blobText(p string, size int64) (string, bool) {
	if size > maxDiffed {
		return "", false
	}
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	return readText(f)
}

// readText reads at most maxDiffed bytes of text: UTF-8 without control
// characters other than tab, newline and carriage return.
func readText(r io.Reader) (string, bool) {
	b, err := io.ReadAll(io.LimitReader(r, maxDiffed+1))
	if err != nil || len(b) > maxDiffed || !utf8.Valid(b) {
		return "", false
	}
	for _, ch := range string(b) {
		if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7f || (ch >= 0x80 && ch < 0xa0) {
			return "", false
		}
	}
	return string(b), true
}
