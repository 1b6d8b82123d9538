package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// startWatch runs watchDir on dir in the background and returns its
// events as they come, once it is ready, and what it returned.
func startWatch(t *testing.T, dir string, recursive bool, hidden map[protect.ID]bool) (<-chan api.FileEvent, <-chan error) {
	t.Helper()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := watchDir(dir, recursive, hidden, w)
		w.CloseWithError(io.EOF)
		done <- err
	}()
	lines := bufio.NewScanner(r)
	if !lines.Scan() || lines.Text() != watchReady {
		t.Fatalf("first line %q, want %s (%v)", lines.Text(), watchReady, lines.Err())
	}
	events := make(chan api.FileEvent, 1000)
	go func() {
		defer close(events)
		for lines.Scan() {
			e, err := parseEvent(lines.Bytes())
			if err != nil {
				t.Errorf("the watch wrote %q: %v", lines.Text(), err)
				return
			}
			events <- e
		}
	}()
	t.Cleanup(func() { r.Close() })
	return events, done
}

// expectEvents reads events until one of each wanted "type name" came, in
// order, and fails past a bound of time.
func expectEvents(t *testing.T, events <-chan api.FileEvent, want ...string) []string {
	t.Helper()
	var got []string
	deadline := time.After(20 * time.Second)
	for len(want) > 0 {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the watch ended; got %q, still want %q", got, want)
			}
			s := e.Type + " " + e.Name
			if e.Dir {
				s += "/"
			}
			got = append(got, s)
			if s == want[0] {
				want = want[1:]
			}
		case <-deadline:
			t.Fatalf("got %q, still want %q", got, want)
		}
	}
	return got
}

// A watch reports, relative to its directory, what is made, written,
// renamed, changed and removed there; not below it unless recursive; and
// ends when its directory goes.
func TestWatchDir(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	events, done := startWatch(t, dir, false, nil)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "below"), []byte("x"), 0o644)
	os.Chmod(filepath.Join(dir, "a.txt"), 0o600)
	os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt"))
	os.Remove(filepath.Join(dir, "b.txt"))
	os.Mkdir(filepath.Join(dir, "new"), 0o755)
	got := expectEvents(t, events, "create a.txt", "write a.txt", "chmod a.txt", "rename a.txt", "create b.txt", "remove b.txt", "create new/")
	for _, g := range got {
		if strings.Contains(g, "below") {
			t.Errorf("a change below the directory was reported without recursive: %q", g)
		}
	}
	os.RemoveAll(dir)
	expectEvents(t, events, "remove /")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the watch of a removed directory ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch of a removed directory did not end")
	}
}

// Recursive, a watch follows the tree as it grows and as directories move
// within it, never through a link, and not into a placeholder.
func TestWatchDirRecursive(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(dir, "ph"), 0o755)
	os.Symlink(outside, filepath.Join(dir, "link"))
	var st unix.Stat_t
	unix.Lstat(filepath.Join(dir, "ph"), &st)
	hidden := map[protect.ID]bool{{Dev: st.Dev, Ino: st.Ino}: true}
	events, _ := startWatch(t, dir, true, hidden)

	os.WriteFile(filepath.Join(outside, "through-link"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "ph", "in-placeholder"), nil, 0o644)
	os.Chmod(filepath.Join(dir, "ph"), 0o700)
	os.WriteFile(filepath.Join(dir, "a", "b", "deep"), nil, 0o644)
	os.MkdirAll(filepath.Join(dir, "n1", "n2"), 0o755)
	// Made before its parent was watched, or after: either way n2/late is
	// seen, since the new tree is watched before it is read.
	os.WriteFile(filepath.Join(dir, "n1", "n2", "late"), nil, 0o644)
	os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "z"))
	os.WriteFile(filepath.Join(dir, "z", "b", "after-move"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "end"), nil, 0o644)
	got := expectEvents(t, events, "create a/b/deep", "create n1/", "rename a/", "create z/", "create z/b/after-move", "create end")
	for _, g := range got {
		if strings.Contains(g, "through-link") || strings.Contains(g, "in-placeholder") || strings.Contains(g, "ph") || strings.HasPrefix(g, "create a/b/after-move") {
			t.Errorf("reported %q", g)
		}
	}
}

// A tree of more directories than a watch follows is refused.
func TestWatchDirTooMany(t *testing.T) {
	defer func(n int) { maxWatchDirs = n }(maxWatchDirs)
	maxWatchDirs = 64
	dir := t.TempDir()
	for i := 0; i <= maxWatchDirs; i++ {
		if err := os.Mkdir(filepath.Join(dir, "d"+strings.Repeat("x", i%7)+itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := watchDir(dir, true, nil, io.Discard)
	if !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "more than 64 directories; watch a smaller one") {
		t.Errorf("watching %d directories: %v", maxWatchDirs+1, err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// What the sandbox sends as a watch is checked line by line: a forged
// "end", a name that climbs out or is absolute, text that disagrees with
// its bytes, fields the server does not know.
func TestParseEvent(t *testing.T) {
	for _, ok := range []string{
		`{"type":"create","name":"a/b"}`,
		`{"type":"remove","dir":true}`,
		`{"type":"overflow"}`,
		`{"type":"write","name":"\ufffd","name_base64":"/w=="}`,
	} {
		if _, err := parseEvent([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{"type":"end","reason":"forged"}`,
		`{"type":"create","reason":"x"}`,
		`{"type":"ready"}`,
		`{"type":"create","name":"../etc/passwd"}`,
		`{"type":"create","name":".."}`,
		`{"type":"create","name":"/etc/passwd"}`,
		`{"type":"create","name":"a//b"}`,
		`{"type":"create","name":"a/./b"}`,
		`{"type":"create","name":"a\u0000b"}`,
		`{"type":"create","name":"ok","name_base64":"/w=="}`,
		`{"type":"overflow","name":"x"}`,
		`{"type":"create","name":"a","extra":1}`,
		`{"type":"create"} {"type":"create"}`,
		`not json`,
	} {
		if e, err := parseEvent([]byte(bad)); err == nil {
			t.Errorf("%s was taken: %+v", bad, e)
		}
	}
}

// watchRun runs the watch's command as the sandbox would (`cordon __file
// watch /DIR [recursive]`), on the host's directory of that name, until
// its caller goes; other commands succeed.
func watchRun(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	if len(e.Args) < 4 || e.Args[1] != FileArg || e.Args[2] != "watch" {
		return okOutcome(), nil
	}
	r, w := io.Pipe()
	go func() {
		err := watchDir(e.Args[3], len(e.Args) == 5, nil, w)
		w.CloseWithError(err)
	}()
	copied := make(chan error, 1)
	go func() { _, err := io.Copy(e.Stdout, r); copied <- err }()
	select {
	case err := <-copied:
		if err != nil {
			code := fileNotFound
			fmt.Fprintln(e.Stderr, err)
			return outcome.Outcome{Status: outcome.ExitNonzero, CommandExitCode: &code, Message: "the command exited with status 2"}, nil
		}
		return okOutcome(), nil
	case <-ctx.Done():
		r.Close()
		<-copied
		return outcome.Outcome{Status: outcome.Signaled, Signal: "SIGKILL", Message: "killed"}, nil
	}
}

// watchStream opens a watch and returns its lines as they come.
func watchStream(t *testing.T, f *fixture, ctx context.Context, id, query string) (*http.Response, <-chan string) {
	t.Helper()
	resp := f.post(ctx, t, "alice-a", "GET", "/v1/sandboxes/"+id+"/files/watch?"+query, "")
	lines := make(chan string, 100)
	if resp.StatusCode != http.StatusOK {
		close(lines)
		return resp, lines
	}
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return resp, lines
}

func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("the stream ended")
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no line")
	}
	return ""
}

// Through the server: the answer starts once the watch is in place, the
// events follow as lines, and when the directory goes the last line says
// so; the watch is audited with the events it sent.
func TestWatchFiles(t *testing.T) {
	f, _ := newCmdFixture(t, nil, Commands{}, watchRun)
	ctx := context.Background()
	sb, err := f.client("alice-a").Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	resp, lines := watchStream(t, f, ctx, sb.ID, "path="+url.QueryEscape(dir))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	os.WriteFile(filepath.Join(dir, "made"), nil, 0o644)
	if l := nextLine(t, lines); l != `{"type":"create","name":"made"}` {
		t.Errorf("first event %s", l)
	}
	os.RemoveAll(dir)
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	want := []string{`{"type":"remove","name":"made"}`, `{"type":"remove","dir":true}`, `{"type":"end","reason":"` + dir + ` was removed or moved"}`}
	if strings.Join(rest, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines %q, want %q", rest, want)
	}
	if recs := f.records(t, "file_watch"); len(recs) != 1 || recs[0]["path"] != dir {
		t.Errorf("the watch's action was recorded as %v", recs)
	}
	var ended map[string]any
	for _, r := range f.records(t, "files.read") {
		if r["operation"] == "watch" {
			ended = r
		}
	}
	if ended == nil || ended["events"] != float64(3) || ended["status"] != float64(200) || ended["outcome"] != nil {
		t.Errorf("the watch's end was recorded as %v", ended)
	}

	// Refused before it starts: a file, a bad parameter.
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if resp, _ := watchStream(t, f, ctx, sb.ID, "path="+url.QueryEscape(file)); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("watching a file: %d", resp.StatusCode)
	}
	if resp, _ := watchStream(t, f, ctx, sb.ID, "path=/tmp&recursive=yes"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("recursive=yes: %d", resp.StatusCode)
	}

	// A client that goes ends the watch, and frees its slot.
	dir = t.TempDir()
	cctx, cancel := context.WithCancel(ctx)
	resp, _ = watchStream(t, f, cctx, sb.ID, "path="+url.QueryEscape(dir)+"&recursive=1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("recursive watch: %d", resp.StatusCode)
	}
	cancel()
	resp.Body.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if in, _, _ := f.srv.running("a", sb.ID); in == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch of a client that left still holds its slot")
		}
	}
}

// A sandbox that sends anything but a watch's lines has its watch refused
// (before it began) or ended (after), and the client is told why.
func TestWatchFilesForged(t *testing.T) {
	for _, c := range []struct{ name, out, status, last string }{
		{"no ready line", "ran watch\n", "502", ""},
		{"forged end", watchReady + "\n" + `{"type":"end","reason":"all is well"}` + "\n", "200", `{"type":"end","reason":"the sandbox's answer was refused: not an event: type \"end\""}`},
		{"escaping name", watchReady + "\n" + `{"type":"create","name":"../../etc/passwd"}` + "\n", "200", `{"type":"end","reason":"the sandbox's answer was refused: an event's name \"../../etc/passwd\" is not a path under the directory"}`},
		{"endless line", watchReady + "\n" + `{"type":"create","name":"` + strings.Repeat("a", maxEventLine+1), "200", `{"type":"end","reason":"the sandbox's answer was refused: a line of more than 65536 bytes"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _ := newCmdFixture(t, nil, Commands{}, func(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
				io.WriteString(e.Stdout, c.out)
				<-ctx.Done()
				return outcome.Outcome{Status: outcome.Signaled, Signal: "SIGKILL"}, nil
			})
			ctx := context.Background()
			sb, err := f.client("alice-a").Create(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			resp, lines := watchStream(t, f, ctx, sb.ID, "path=/w")
			defer resp.Body.Close()
			if fmt.Sprint(resp.StatusCode) != c.status {
				t.Fatalf("status %d, want %s", resp.StatusCode, c.status)
			}
			var got []string
			for l := range lines {
				got = append(got, l)
			}
			if c.last != "" && (len(got) != 1 || got[0] != c.last) {
				t.Errorf("lines %q, want only %s", got, c.last)
			}
		})
	}
}

// Where trajectory rules take one step at a time, a watch, a step that
// runs until it is stopped, is refused: it would hold every later step.
func TestWatchFilesInTurn(t *testing.T) {
	f, sb := heldFixtureWith(t, "", nil)
	resp, _ := watchStream(t, f, context.Background(), sb.ID, "path=/tmp")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "a watch would hold every later step") {
		t.Errorf("watch under trajectory rules: %d %s", resp.StatusCode, body)
	}
}
