//go:build linux

package changes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// env is a host workspace, a layer (upper/ and work/) and a state
// directory, as a run in review mode leaves them.
type env struct {
	host, layer, upper, state string
	started                   time.Time
}

const testRun = "run-1"

func root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mknod of whiteouts, mounts)")
	}
}

func newEnv(t testing.TB) *env {
	t.Helper()
	d := t.TempDir()
	e := &env{host: filepath.Join(d, "host"), layer: filepath.Join(d, "layer"), state: filepath.Join(d, "state", "changes")}
	e.upper = filepath.Join(e.layer, "upper")
	for _, p := range []string{e.host, e.upper, filepath.Join(e.layer, "work")} {
		must(t, os.MkdirAll(p, 0o755))
	}
	return e
}

// start marks the run as started: what the host has now was there before.
func (e *env) start() { e.started = time.Now() }

func (e *env) capture(t testing.TB, lim Limits) (*Set, error) {
	t.Helper()
	layer, err := os.Open(e.layer)
	must(t, err)
	defer layer.Close()
	return Capture(layer, e.host, e.state, testRun, e.started, lim)
}

func (e *env) mustCapture(t testing.TB) *Set {
	t.Helper()
	s, err := e.capture(t, Limits{})
	must(t, err)
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// write makes the file p (parents too) with content and mode.
func write(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, unix.Chmod(p, uint32(mode)))
}

func whiteoutAt(t testing.TB, p string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, unix.Mknod(p, unix.S_IFCHR, 0))
}

func makeOpaque(t testing.TB, p string) {
	t.Helper()
	must(t, os.MkdirAll(p, 0o755))
	must(t, unix.Setxattr(p, "user.overlay.opaque", []byte("y"), 0))
}

// summary is a change as tests compare it: kind, type, path, flags.
func summary(c Change) string {
	s := fmt.Sprintf("%s %s %q", c.Kind, c.Type, c.Path)
	if len(c.Flags) > 0 {
		s += " [" + strings.Join(c.Flags, ",") + "]"
	}
	return s
}

func summaries(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, summary(c))
	}
	return out
}

func sameList(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// entry is a path of a tree as tests compare them.
type entry struct {
	typ     string
	mode    os.FileMode
	content string // a file's content, a link's target
}

// tree reads every path under dir (not following links), skipping special
// files when noSpecial.
func tree(t testing.TB, dir string, noSpecial bool) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		e := entry{mode: fi.Mode().Perm() | fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.typ, e.content = "file", string(b)
		case fi.IsDir():
			e.typ = "dir"
		case fi.Mode()&os.ModeSymlink != 0:
			e.typ, e.mode = "symlink", 0
			e.content, _ = os.Readlink(p)
		default:
			if noSpecial {
				return nil
			}
			e.typ = "special"
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	must(t, err)
	return out
}

func sameTree(t testing.TB, got, want map[string]entry) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q missing (want %v)", p, w))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%q: got %v, want %v", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q unexpected (%v)", p, g))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		t.Errorf("trees differ:\n\t%s", strings.Join(diffs, "\n\t"))
	}
}

func readString(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

func contains(b *bytes.Buffer, s string) bool { return strings.Contains(b.String(), s) }

// checkProtected checks, for each path of want, whether s flags its change
// protected as want says.
func checkProtected(t testing.TB, s *Set, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for _, c := range s.Changes {
		got[c.Path] = c.Has(FlagProtected)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: protected %v, want %v (all: %v)", p, got[p], w, got)
		}
	}
}
