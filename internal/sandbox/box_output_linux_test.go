package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/testbin"
)

var (
	cordonOnce sync.Once
	cordonExe  *sandbox.Executable
	cordonErr  error
)

// cordon is a sealed copy of the cordon binary, built without cgo as
// released: the sandbox's init starts from it (the
// test binary, built with cgo for the race detector, cannot be init).
func cordon(t testing.TB) *sandbox.Executable {
	t.Helper()
	cordonOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cordon-box-test")
		if err != nil {
			cordonErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "cordon")
		if err := testbin.Cordon(bin); err != nil {
			cordonErr = err
			return
		}
		cordonExe, cordonErr = sandbox.ExecutableAt(bin)
	})
	if cordonErr != nil {
		t.Fatal(cordonErr)
	}
	return cordonExe
}

// startBox starts a sandbox of the default profile on a workspace of its
// own, with the limits given (name, value, ...), and returns it with its
// workspace on the host. It skips the test where this host cannot build
// sandboxes.
func startBox(t testing.TB, limits ...string) (*sandbox.Box, string) {
	t.Helper()
	p := profile.Default()
	p.Workspace.Path = t.TempDir()
	os.Chmod(p.Workspace.Path, 0o777)
	// Every command ends by this, whatever it waits for.
	limits = append([]string{"wall", "60s"}, limits...)
	for i := 0; i+1 < len(limits); i += 2 {
		if err := p.SetLimit(limits[i], limits[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	box, err := sandbox.Start(sandbox.Options{Profile: p, Exe: cordon(t), Cwd: p.Workspace.Path, LookupEnv: os.LookupEnv})
	if err != nil {
		t.Skipf("this host cannot build sandboxes: %v", err)
	}
	t.Cleanup(box.Close)
	return box, p.Workspace.Path
}

// sh runs script with sh -c in box, and returns its outcome, stdout and
// stderr.
func sh(t *testing.T, ctx context.Context, box *sandbox.Box, script string) (outcome.Outcome, string, string) {
	t.Helper()
	var stdout bytes.Buffer
	return shTo(t, ctx, box, script, &stdout), stdout.String(), ""
}

// shTo runs script with sh -c in box, its stdout to stdout.
func shTo(t *testing.T, ctx context.Context, box *sandbox.Box, script string, stdout io.Writer) outcome.Outcome {
	t.Helper()
	var stderr bytes.Buffer
	o, err := box.Exec(ctx, sandbox.ExecOptions{Args: []string{"sh", "-c", script}, Stdout: stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if stderr.Len() > 0 {
		t.Logf("%s: stderr %q", script, stderr.String())
	}
	return o
}

// cutNotes are the notes of o that say its output was cut.
func cutNotes(o outcome.Outcome) []string {
	var cut []string
	for _, n := range o.Notes {
		if strings.HasPrefix(n, "output was cut") {
			cut = append(cut, n)
		}
	}
	return cut
}

// background starts, in the script, a process in a session of its own
// running script and waits until it runs.
func background(script string) string {
	return fmt.Sprintf(`setsid sh -c '%s' & until [ -e /tmp/bg.$! ]; do sleep 0.01; done; `, "touch /tmp/bg.$$; "+script)
}

// A process the command started in a session of its own, still holding
// the command's output at its end, delays the answer by the grace at
// most; the outcome names it, its name escaped.
func TestOutputHeldByBackground(t *testing.T) {
	box, _ := startBox(t)
	for _, tt := range []struct{ script, held string }{
		{background("exec sleep 100") + "echo hi", `process \d+ "sleep", outside the command's process group, still holds its stdout and stderr open$`},
		{background("exec 2>/dev/null; exec sleep 100") + "echo hi", `process \d+ "sleep", outside the command's process group, still holds its stdout open$`},
		{background(`cp /bin/sleep "/tmp/$(printf "\\033[31mx\\342\\200\\256")"; exec 1>&-; exec /tmp/*x* 100`) + "echo hi",
			`process \d+ "\\x1b\[31mx\\u202e", outside the command's process group, still holds its stderr open$`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against a hang
		o, stdout, _ := sh(t, ctx, box, tt.script)
		cancel()
		cut := cutNotes(o)
		if o.Status != outcome.OK || stdout != "hi\n" || len(cut) != 1 || !regexp.MustCompile(`^output was cut [0-9.]+m?s after the command's end: `+tt.held).MatchString(cut[0]) {
			t.Errorf("%s: %s %q, notes %q; want ok, hi and the holder named", tt.script, o.Status, stdout, o.Notes)
		}
	}
}

// A process of the command's own process group is killed with it: what it
// would write later never exists, and the command answers at once.
func TestBackgroundInTheCommandsGroupEndsWithIt(t *testing.T) {
	defer sandbox.SetOutputGrace(time.Hour)()
	box, _ := startBox(t)
	for _, script := range []string{"sleep 100 & echo hi", "echo hi; (sleep 1; echo late) &", "echo hi; sleep 100 & exec sleep 100 &"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against the grace
		o, stdout, _ := sh(t, ctx, box, script)
		cancel()
		if o.Status != outcome.OK || stdout != "hi\n" || len(o.Notes) != 0 {
			t.Errorf("%s: %s %q, notes %q; want ok and hi alone", script, o.Status, stdout, o.Notes)
		}
	}
}

// A background process that closed its stdout and stderr costs no wait:
// the command answers with all its output while that process still runs.
func TestBackgroundWithoutTheOutput(t *testing.T) {
	defer sandbox.SetOutputGrace(time.Hour)()
	box, _ := startBox(t)
	for i, bg := range []string{"exec >/dev/null 2>&1; exec sleep 1001", "exec >&- 2>&-; exec sleep 1002"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against the grace
		o, stdout, _ := sh(t, ctx, box, background(bg)+"echo hi")
		cancel()
		if o.Status != outcome.OK || stdout != "hi\n" || len(o.Notes) != 0 {
			t.Errorf("%s: %s %q, notes %q; want ok and hi alone", bg, o.Status, stdout, o.Notes)
		}
		check := fmt.Sprintf(`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <$f; echo; done | grep -c '^sleep 100%d'`, i+1)
		if _, running, _ := sh(t, context.Background(), box, check); running != "1\n" {
			t.Errorf("%s: no sleep process after the answer: the answer waited for its end", bg)
		}
	}
}

// What a background process writes to the command's output after the
// command's end, within the grace, is kept: the output ends when its last
// holder ends.
func TestLateOutputWithinTheGraceIsKept(t *testing.T) {
	defer sandbox.SetOutputGrace(time.Hour)()
	box, _ := startBox(t)
	script := "echo hi; P=$$ " + background("while [ -e /proc/$P ]; do sleep 0.01; done; echo late")
	o, stdout, _ := sh(t, context.Background(), box, script)
	if o.Status != outcome.OK || stdout != "hi\nlate\n" || len(o.Notes) != 0 {
		t.Errorf("%s, %q, notes %q; want ok and hi, late", o.Status, stdout, o.Notes)
	}
}

// stalled is a command's stdout that takes nothing until open is closed.
type stalled struct {
	open chan struct{}
	bytes.Buffer
}

func (s *stalled) Write(p []byte) (int, error) {
	<-s.open
	return s.Buffer.Write(p)
}

// A reader slower than the command loses nothing, however long after the
// command's end it reads (a busy host, a slow client): without a holder
// the output is read to its end; with one, what waits in the pipe at the
// cut is still read.
func TestSlowReaderLosesNothing(t *testing.T) {
	box, dir := startBox(t)
	const size = 60000 // fits in the pipe: the command ends before it is read
	for _, tt := range []struct {
		name, bg, cut string
	}{
		{"alone", "", ""},
		{"beside a holder", background("exec sleep 100"), `process \d+ "sleep", outside the command's process group, still holds its stdout and stderr open$`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "done"))
			out := &stalled{open: make(chan struct{})}
			go func() {
				// Opened 6 s after the command's end: past the grace, and
				// past any fixed wait of the past (0.5 s, then 5 s while
				// bytes were waiting in the pipe).
				for i := 0; i < 6000; i++ {
					if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(6 * time.Second)
				close(out.open)
			}()
			o := shTo(t, context.Background(), box, tt.bg+fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; touch done", size), out)
			cut := cutNotes(o)
			if o.Status != outcome.OK || out.String() != strings.Repeat("a", size) {
				t.Errorf("%s, %d bytes of stdout, notes %q; want ok and all %d bytes", o.Status, out.Len(), o.Notes, size)
			}
			if tt.cut == "" && len(cut) > 0 || tt.cut != "" && (len(cut) != 1 || !regexp.MustCompile(tt.cut).MatchString(cut[0])) {
				t.Errorf("notes %q; want a note of a cut %v", o.Notes, tt.cut != "")
			}
		})
	}
}

// A command killed (for its wall-clock limit, or by its caller) while a
// background process holds its output still answers, with what it wrote.
func TestKilledCommandWithAHolderAnswers(t *testing.T) {
	t.Run("wall", func(t *testing.T) {
		box, _ := startBox(t, "wall", "5s")
		o, stdout, _ := sh(t, context.Background(), box, background("exec sleep 100")+"echo hi; exec sleep 100")
		cut := cutNotes(o)
		if o.Status != outcome.Timeout || stdout != "hi\n" || len(cut) != 1 || !strings.Contains(cut[0], `"sleep", outside the command's process group`) {
			t.Errorf("%s %q, notes %q; want timeout, hi and the holder named", o.Status, stdout, o.Notes)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		defer sandbox.SetOutputGrace(time.Hour)()
		box, _ := startBox(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &cancelAt{want: "hi\n", cancel: cancel}
		o := shTo(t, ctx, box, background("exec sleep 100")+"echo hi; exec sleep 100", out)
		cut := cutNotes(o)
		if out.String() != "hi\n" || len(cut) != 1 || !strings.Contains(cut[0], `when its caller stopped waiting: process`) || !slices.Contains(o.Notes, "the command was cancelled by its caller") {
			t.Errorf("%s %q, notes %q; want hi, the cancellation and the holder named", o.Status, out.String(), o.Notes)
		}
	})
}

// cancelAt is a command's stdout that calls cancel once it holds want.
type cancelAt struct {
	bytes.Buffer
	want   string
	cancel func()
}

func (c *cancelAt) Write(p []byte) (int, error) {
	n, err := c.Buffer.Write(p)
	if c.String() == c.want {
		c.cancel()
	}
	return n, err
}
