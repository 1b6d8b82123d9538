package changes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fixture is a host workspace and a layer whose upper the test fills as
// an overlay would.
type fixture struct {
	ws, layer, upper, state string
	started                 time.Time
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	d := t.TempDir()
	f := &fixture{ws: filepath.Join(d, "ws"), layer: filepath.Join(d, "layer"), state: filepath.Join(d, "state")}
	f.upper = filepath.Join(f.layer, upperDir)
	for _, p := range []string{f.ws, f.upper} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func write(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
}

func whiteout(t testing.TB, p string) {
	t.Helper()
	if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
		t.Skipf("mknod: %v (needs root)", err)
	}
}

func (f *fixture) capture(t testing.TB, lim Limits) (*Set, error) {
	t.Helper()
	l, err := os.Open(f.layer)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return Capture(l, f.ws, f.state, "run-1", f.started, lim)
}

func summary(s *Set) []string {
	var out []string
	for _, c := range s.Changes {
		line := c.Kind + " " + c.Type + " " + c.Path
		if len(c.Flags) > 0 {
			line += " " + strings.Join(c.Flags, ",")
		}
		out = append(out, line)
	}
	return out
}

// seed is a host workspace and the upper a run leaves on it.
func seed(t *testing.T) *fixture {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "a.txt"), "hello\n", 0o644)
	write(t, filepath.Join(f.ws, "gone"), "x", 0o644)
	write(t, filepath.Join(f.ws, "same"), "same", 0o644)
	write(t, filepath.Join(f.ws, "mode"), "m", 0o644)
	write(t, filepath.Join(f.ws, "docs/old"), "o", 0o644)
	write(t, filepath.Join(f.ws, "tree/x/y"), "y", 0o644)
	os.MkdirAll(filepath.Join(f.ws, ".git/hooks"), 0o755)
	f.started = time.Now()
	time.Sleep(10 * time.Millisecond) // the host's files are older than the run

	write(t, filepath.Join(f.upper, "a.txt"), "hello\nchanged\n", 0o644)
	whiteout(t, filepath.Join(f.upper, "gone"))
	write(t, filepath.Join(f.upper, "same"), "same", 0o644) // copied up, unchanged
	write(t, filepath.Join(f.upper, "mode"), "m", 0o755)
	write(t, filepath.Join(f.upper, "docs/new"), "n", 0o644)
	if err := unix.Setxattr(filepath.Join(f.upper, "docs"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("xattr: %v", err)
	}
	whiteout(t, filepath.Join(f.upper, "tree"))
	write(t, filepath.Join(f.upper, ".git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
	os.Symlink("../../etc/passwd", filepath.Join(f.upper, "out"))
	os.Symlink("a.txt", filepath.Join(f.upper, "in"))
	write(t, filepath.Join(f.upper, "new\nline"), "nl", 0o600)
	write(t, filepath.Join(f.upper, "bin"), "\x00\x01", 0o644)
	if err := unix.Mkfifo(filepath.Join(f.upper, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCaptureApply(t *testing.T) {
	f := seed(t)
	s, err := f.capture(t, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"added file .git/hooks/pre-commit executable,protected",
		"modified file a.txt",
		"added file bin binary",
		"added file docs/new",
		"deleted file docs/old",
		"added special fifo special",
		"deleted file gone",
		"added symlink in",
		"modified file mode executable",
		"added file new\nline",
		"added symlink out outside_link",
		"deleted dir tree",
		"deleted dir tree/x",
		"deleted file tree/x/y",
	}
	if got := summary(s); !slices.Equal(got, want) {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	loaded, err := Load(f.state, "run-1")
	if err != nil || loaded.Digest != s.Digest {
		t.Fatalf("Load: %v (%v)", err, loaded)
	}

	rep, err := Apply(s, f.state, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Conflicts) != 0 || !slices.Equal(rep.Refused, []string{"fifo"}) || len(rep.Applied) != len(want)-1 {
		t.Fatalf("report: %+v", rep)
	}
	for p, content := range map[string]string{"a.txt": "hello\nchanged\n", "docs/new": "n", "new\nline": "nl", ".git/hooks/pre-commit": "#!/bin/sh\n"} {
		if b, err := os.ReadFile(filepath.Join(f.ws, p)); err != nil || string(b) != content {
			t.Errorf("%q: %q, %v", p, b, err)
		}
	}
	for _, p := range []string{"gone", "docs/old", "tree", "fifo"} {
		if _, err := os.Lstat(filepath.Join(f.ws, p)); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", p, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(f.ws, "mode")); fi == nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode: %v", fi)
	}
	if l, _ := os.Readlink(filepath.Join(f.ws, "out")); l != "../../etc/passwd" {
		t.Errorf("out -> %q", l)
	}

	// Again: everything is in place already.
	again, err := Apply(s, f.state, nil, ApplyOptions{})
	if err != nil || len(again.Applied) != 0 || len(again.Already) != len(want)-1 || len(again.Conflicts) != 0 {
		t.Fatalf("second apply: %+v, %v", again, err)
	}
}

// A link put in the host's tree after the run, on the way to a change, is
// never followed: the change is a conflict and nothing lands outside.
func TestApplyFollowsNoLink(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "sub/deeper/file"), "old", 0o644)
	f.started = time.Now()
	time.Sleep(10 * time.Millisecond)
	write(t, filepath.Join(f.upper, "sub/deeper/file"), "new", 0o644)
	write(t, filepath.Join(f.upper, "sub/deeper/added"), "new", 0o644)
	s, err := f.capture(t, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(outside, "deeper/file"), "old", 0o644)
	os.RemoveAll(filepath.Join(f.ws, "sub"))
	if err := os.Symlink(outside, filepath.Join(f.ws, "sub")); err != nil {
		t.Fatal(err)
	}
	rep, err := Apply(s, f.state, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Applied) != 0 || len(rep.Conflicts) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "deeper/file")); string(b) != "old" {
		t.Fatalf("the file outside was written: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "deeper/added")); err == nil {
		t.Fatal("a file was added outside")
	}
}

// A host file changed during the run, or after the capture, is a
// conflict.
func TestApplyConflicts(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "before"), "old", 0o644)
	write(t, filepath.Join(f.ws, "after"), "old", 0o644)
	f.started = time.Now()
	time.Sleep(10 * time.Millisecond)
	write(t, filepath.Join(f.ws, "before"), "host", 0o644) // during the run
	write(t, filepath.Join(f.upper, "before"), "sandbox", 0o644)
	write(t, filepath.Join(f.upper, "after"), "sandbox", 0o644)
	write(t, filepath.Join(f.upper, "added"), "sandbox", 0o644)
	s, err := f.capture(t, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.ws, "after"), "host!", 0o644) // after the capture
	write(t, filepath.Join(f.ws, "added"), "host", 0o644)
	rep, err := Apply(s, f.state, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Applied) != 0 || len(rep.Conflicts) != 3 {
		t.Fatalf("report: %+v", rep)
	}
	for p, want := range map[string]string{"before": "host", "after": "host!", "added": "host"} {
		if b, _ := os.ReadFile(filepath.Join(f.ws, p)); string(b) != want {
			t.Errorf("%s: %q", p, b)
		}
	}
}

// An apply cut short (a kill) leaves each file old or new, and the next
// one finishes.
func TestApplyInterrupted(t *testing.T) {
	f := newFixture(t)
	for i := range 20 {
		write(t, filepath.Join(f.ws, fmt.Sprintf("f%02d", i)), "old", 0o644)
	}
	f.started = time.Now()
	time.Sleep(10 * time.Millisecond)
	for i := range 20 {
		write(t, filepath.Join(f.upper, fmt.Sprintf("f%02d", i)), "new", 0o644)
	}
	s, err := f.capture(t, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(s, f.state, nil, ApplyOptions{stopAfter: 7}); err == nil {
		t.Fatal("the apply was not stopped")
	}
	news := 0
	for i := range 20 {
		b, _ := os.ReadFile(filepath.Join(f.ws, fmt.Sprintf("f%02d", i)))
		switch string(b) {
		case "new":
			news++
		case "old":
		default:
			t.Fatalf("f%02d: %q", i, b)
		}
	}
	if news != 7 {
		t.Fatalf("%d files landed, want 7", news)
	}
	rep, err := Apply(s, f.state, nil, ApplyOptions{})
	if err != nil || len(rep.Already) != 7 || len(rep.Applied) != 13 || len(rep.Conflicts) != 0 {
		t.Fatalf("second apply: %+v, %v", rep, err)
	}
}

func TestCaptureLimits(t *testing.T) {
	f := newFixture(t)
	for i := range 10 {
		write(t, filepath.Join(f.upper, fmt.Sprint(i)), strings.Repeat("x", 100), 0o644)
	}
	if _, err := f.capture(t, Limits{MaxEntries: 9}); err == nil || !strings.Contains(err.Error(), "more than 9 entries") {
		t.Fatalf("entries: %v", err)
	}
	if _, err := f.capture(t, Limits{MaxBytes: 999}); err == nil || !strings.Contains(err.Error(), "more than 999 bytes") {
		t.Fatalf("bytes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.state, "run-1")); !os.IsNotExist(err) {
		t.Fatalf("a refused capture left its set: %v", err)
	}
	if _, err := f.capture(t, Limits{MaxEntries: 10, MaxBytes: 1000}); err != nil {
		t.Fatal(err)
	}
}

// A set edited outside cordon no longer matches its digest.
func TestLoadChecksDigest(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.upper, "x"), "x", 0o644)
	if _, err := f.capture(t, Limits{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.state, "run-1", setFile)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `"path": "x"`, `"path": "y"`, 1)), 0o600)
	if _, err := Load(f.state, "run-1"); err == nil {
		t.Fatal("an edited set loaded")
	}
	if _, err := Load(f.state, "../x"); err == nil {
		t.Fatal("a path as a set id loaded")
	}
}

func BenchmarkApply10k(b *testing.B) {
	for range b.N {
		b.StopTimer()
		f := newFixture(b)
		for i := range 10000 {
			write(b, filepath.Join(f.upper, fmt.Sprintf("d%02d/f%05d", i%100, i)), fmt.Sprint(i), 0o644)
		}
		s, err := f.capture(b, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := Apply(s, f.state, nil, ApplyOptions{})
		if err != nil || len(rep.Applied) != 10100 {
			b.Fatalf("%v %d", err, len(rep.Applied))
		}
	}
}
