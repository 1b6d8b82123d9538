package cli_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/coder/websocket"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// TestServeTimeout: a command's own timeout ends it with an outcome that
// names that limit, in an exec and in a create's first command; one over
// the profile's wall limit is refused.
func TestServeTimeout(t *testing.T) {
	s := startServe(t, "  timed:\n    profile: timed.yaml\n", map[string]string{
		"timed.yaml": testProfile("timed", "  wall: 5m\n"),
	})
	ctx := context.Background()
	c := s.client("timed")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"sleep", "120"}, Timeout: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, o outcome.Outcome) {
		t.Helper()
		if o.Status != outcome.Timeout || o.Limit == nil || o.Limit.Name != "timeout" || o.Limit.Value != "1s" || !strings.Contains(o.Message, "timeout limit (1s)") {
			t.Errorf("%s: %+v", what, o)
		}
	}
	if sb.Result == nil {
		t.Fatalf("create: no result: %+v", sb)
	}
	check("create", sb.Result.Outcome)
	o, err := c.Exec(ctx, sb.ID, api.ExecRequest{Args: []string{"sleep", "120"}, Timeout: "1s"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("exec", o)
	// Without one, the wall limit holds, and a command that ends in time
	// is not touched.
	if o, err := c.Exec(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}, Timeout: "1m"}, nil, nil); err != nil || o.Status != outcome.OK {
		t.Errorf("a command within its timeout: %+v %v", o, err)
	}
	for _, bad := range []string{"6m", "30", "-1s"} {
		_, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}, Timeout: bad})
		if !client.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("timeout %q: %v", bad, err)
		}
	}
	if _, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"true"}, Timeout: "1h"}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("create with a timeout over the wall limit: %v", err)
	}
}

// TestServeListDir lists directories inside a sandbox: types, a link's
// target (not followed), a name that is not UTF-8, the cut at max, and
// the statuses of what cannot be listed.
func TestServeListDir(t *testing.T) {
	s := startServe(t, "  lister:\n    profile: lister.yaml\n", map[string]string{
		"lister.yaml": testProfile("lister", "  wall: 1m\n"),
	})
	ctx := context.Background()
	c := s.client("lister")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"sh", "-c", `mkdir d d/sub && printf hello > d/a.txt && chmod 640 d/a.txt && ln -s /etc/passwd d/link && touch "d/$(printf 'bad\376')" && mkfifo d/fifo`}})
	if err != nil || sb.Result == nil || sb.Result.Outcome.Status != outcome.OK {
		t.Fatalf("%+v %v", sb, err)
	}
	l, err := c.ListDir(ctx, sb.ID, "/workspace/d", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
		switch e.Name {
		case "a.txt":
			if e.Size != 5 || e.Mode != "0640" || e.Modified.IsZero() {
				t.Errorf("a.txt: %+v", e)
			}
		case "link":
			if e.Target != "/etc/passwd" {
				t.Errorf("link: %+v", e)
			}
		case "bad\uFFFD":
			if string(e.NameBase64) != "bad\xfe" {
				t.Errorf("a name that is not UTF-8: %+v", e)
			}
		}
	}
	if got := strings.Join(names, " "); l.Path != "/workspace/d" || l.Truncated || got != "a.txt:file bad\uFFFD:file fifo:other link:symlink sub:dir" {
		t.Errorf("listing: %s %+v", got, l)
	}
	if l, err := c.ListDir(ctx, sb.ID, "/workspace/d", 2); err != nil || len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("max 2: %+v %v", l, err)
	}
	for path, status := range map[string]int{"/workspace/nothing": http.StatusNotFound, "/workspace/d/a.txt": http.StatusBadRequest, "relative": http.StatusBadRequest} {
		if _, err := c.ListDir(ctx, sb.ID, path, 0); !client.IsStatus(err, status) {
			t.Errorf("%s: %v, want %d", path, err, status)
		}
	}
	if _, err := c.ListDir(ctx, sb.ID, "/workspace", listTooMany); !client.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("max %d: %v", listTooMany, err)
	}
	if !audited(t, s, sb.ID, "files.list", `"entries":5,"path":"/workspace/d","status":200,"truncated":false`) {
		t.Error("the audit log has no record of the listing")
	}
}

const listTooMany = 10001

// TestServeListHidesPlaceholders lists a workspace cordon made placeholders
// in: they are not listed, nor downloaded, while what the user made there
// (a real .git, an empty .vscode of theirs) is, whatever its name.
func TestServeListHidesPlaceholders(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{".git", ".vscode", "src"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "README"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o755)
	profile := strings.Replace(testProfile("lister", "  wall: 1m\n"), "  path: .\n", "  path: "+ws+"\n  target: /workspace\n", 1)
	s := startServe(t, "  lister:\n    profile: lister.yaml\n", map[string]string{"lister.yaml": profile})
	ctx := context.Background()
	c := s.client("lister")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"sh", "-c", "ls -A /workspace | tr '\\n' ' '"}})
	if err != nil || sb.Result == nil || sb.Result.Outcome.Status != outcome.OK {
		t.Fatalf("%+v %v", sb, err)
	}
	// The sandbox's own ls sees them: they hold the paths in place.
	if !strings.Contains(string(sb.Result.Stdout), ".claude") {
		t.Fatalf("no placeholder in the workspace to hide: ls -A shows %q", sb.Result.Stdout)
	}
	l, err := c.ListDir(ctx, sb.ID, "/workspace", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, " "); got != ".git .vscode README src" {
		t.Errorf("listing of the workspace: %s, want .git .vscode README src", got)
	}
	var archive bytes.Buffer
	if _, err := c.DownloadTar(ctx, sb.ID, "/workspace", &archive); err != nil {
		t.Fatal(err)
	}
	names = nil
	tr := tar.NewReader(&archive)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != ".git/ .vscode/ README src/" {
		t.Errorf("archive of the workspace: %s, want .git/ .vscode/ README src/", got)
	}
	// A command that fails on a protected path is told so, from the
	// directory it runs in.
	o, err := c.Exec(ctx, sb.ID, api.ExecRequest{Args: []string{"sh", "-c", "echo {} > ../.vscode/settings.json"}, Dir: "/workspace/src"}, nil, nil)
	if err != nil || o.Status != outcome.ExitNonzero || o.ExitCode != 2 || !slices.Equal(o.Protected, []string{".vscode"}) || !strings.Contains(o.Message, "cordon protects .vscode") {
		t.Errorf("a write to .vscode: %+v %v", o, err)
	}
}

// TestServeTar moves a directory out of a sandbox and into another as tar
// streams, made and read inside the sandboxes: links stay links, nothing
// is written outside the directory, and the profile's file_size holds.
func TestServeTar(t *testing.T) {
	s := startServe(t, "  tarred:\n    profile: tarred.yaml\n", map[string]string{
		"tarred.yaml": testProfile("tarred", "  wall: 1m\n  file_size: 1MiB\n"),
	})
	ctx := context.Background()
	c := s.client("tarred")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"sh", "-c", `mkdir -p d/sub && printf hello > d/sub/a.txt && ln -s /etc/passwd d/link && mkfifo d/fifo`}})
	if err != nil || sb.Result == nil || sb.Result.Outcome.Status != outcome.OK {
		t.Fatalf("%+v %v", sb, err)
	}
	var archive bytes.Buffer
	res, err := c.DownloadTar(ctx, sb.ID, "/workspace/d", &archive)
	if err != nil || res.Entries != 3 || res.Bytes != 5 {
		t.Fatalf("download: %+v %v", res, err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(archive.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		names = append(names, h.Name+"="+h.Linkname)
	}
	if got := strings.Join(names, " "); got != "link=/etc/passwd sub/= sub/a.txt=" {
		t.Errorf("archive: %s", got)
	}
	// Into a second sandbox, with a hostile entry after the good ones.
	other, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"mkdir", "/workspace/in"}})
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.UploadTar(ctx, other.ID, "/workspace/in", bytes.NewReader(archive.Bytes()))
	if err != nil || up.Entries != 3 || up.Bytes != 5 || up.ArchiveBytes != int64(archive.Len()) {
		t.Fatalf("upload: %+v %v", up, err)
	}
	if !audited(t, s, other.ID, "files.write", fmt.Sprintf(`"archive":"tar","archive_bytes":%d,"bytes":5,"entries":3,`, archive.Len())) {
		t.Error("the audit log has no record of the upload's entries and bytes")
	}
	out, err := c.Run(ctx, other.ID, api.ExecRequest{Args: []string{"sh", "-c", "cat in/sub/a.txt; readlink in/link"}})
	if err != nil || string(out.Stdout) != "hello/etc/passwd\n" {
		t.Errorf("extracted: %q %v", out.Stdout, err)
	}
	hostile := func(hdrs ...*tar.Header) *bytes.Reader {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			tw.WriteHeader(h)
			if h.Size > 0 {
				tw.Write(make([]byte, h.Size))
			}
		}
		tw.Close()
		return bytes.NewReader(b.Bytes())
	}
	for name, tc := range map[string]struct {
		r      *bytes.Reader
		status int
	}{
		"through a link":    {hostile(&tar.Header{Name: "esc", Typeflag: tar.TypeSymlink, Linkname: "/workspace"}, &tar.Header{Name: "esc/owned", Typeflag: tar.TypeReg, Mode: 0o644}), http.StatusBadRequest},
		"dot dot":           {hostile(&tar.Header{Name: "../owned", Typeflag: tar.TypeReg, Mode: 0o644}), http.StatusBadRequest},
		"a device":          {hostile(&tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}), http.StatusBadRequest},
		"over file_size":    {hostile(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 2 << 20, Mode: 0o644}), http.StatusRequestEntityTooLarge},
		"not a directory":   {hostile(), http.StatusNotFound},
		"not a tar archive": {bytes.NewReader([]byte("not a tar archive, not at all, ........................................")), http.StatusBadRequest},
	} {
		dir := "/workspace/in"
		if name == "not a directory" {
			dir = "/workspace/none"
		}
		if _, err := c.UploadTar(ctx, other.ID, dir, tc.r); !client.IsStatus(err, tc.status) {
			t.Errorf("%s: %v, want %d", name, err, tc.status)
		}
	}
	// What came before a refused entry stays (the answer counts it);
	// nothing is written outside the directory.
	if out, _ := c.Run(ctx, other.ID, api.ExecRequest{Args: []string{"sh", "-c", "ls /workspace; ls -A /workspace/in; test -e /workspace/owned || echo clean"}}); string(out.Stdout) != "in\nbig\nesc\nlink\nsub\nclean\n" {
		t.Errorf("after the refused archives: %q", out.Stdout)
	}
}

// audited reports whether a record of type typ of sandbox id holds want
// (its JSON without spaces).
func audited(t *testing.T, s *served, id, typ, want string) bool {
	t.Helper()
	recs, err := s.client("ops").Audit(context.Background(), neturl.Values{"sandbox": {id}, "type": {typ}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if strings.Contains(strings.Join(strings.Fields(string(rec)), ""), want) {
			return true
		}
	}
	t.Logf("records of %s: %s", typ, recs)
	return false
}

// TestServeTerminal runs commands on a terminal over a WebSocket: a
// terminal of the sandbox's own, sized and resized, input, a signal, the
// outcome last, and the audit log's record.
func TestServeTerminal(t *testing.T) {
	s := startServe(t, "  typist:\n    profile: typist.yaml\n", map[string]string{
		"typist.yaml": testProfile("typist", "  wall: 1m\n"),
	})
	ctx := context.Background()
	c := s.client("typist")
	sb, err := c.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.Terminal(ctx, sb.ID, client.TerminalOptions{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan outcome.Outcome, 1)
	go func() {
		o, err := term.Wait(pw)
		if err != nil {
			t.Error(err)
		}
		pw.Close()
		done <- o
	}()
	out := bufio.NewReader(pr)
	expect := func(want string) {
		t.Helper()
		var seen strings.Builder
		for !strings.Contains(seen.String(), want) {
			b, err := out.ReadByte()
			if err != nil {
				t.Fatalf("waiting for %q: %v; the terminal showed %q", want, err, seen.String())
			}
			seen.WriteByte(b)
		}
	}
	io.WriteString(term, "tty; stty size; test -t 0 && echo stdin-is-a-tty\n")
	expect("/dev/pts/")
	expect("30 100")
	expect("stdin-is-a-tty")
	// A resize reaches the terminal (asked again until the shell sees it).
	if err := term.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		io.WriteString(term, "stty size\n")
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "40 120") {
			break
		}
		if i == 250 {
			t.Fatalf("the terminal was not resized: %q", line)
		}
		// A loaded machine may take a while to pass the resize on.
		time.Sleep(20 * time.Millisecond)
	}
	go io.Copy(io.Discard, out)
	io.WriteString(term, "exit 3\n")
	if o := <-done; o.Status != outcome.ExitNonzero || o.ExitCode != 3 {
		t.Errorf("outcome: %+v", o)
	}
	// A signal goes to the command's process group.
	term, err = c.Terminal(ctx, sb.ID, client.TerminalOptions{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Signal("SIGINT"); err != nil {
		t.Fatal(err)
	}
	if o, err := term.Wait(io.Discard); err != nil || o.Status != outcome.Signaled || o.Signal != "SIGINT" {
		t.Errorf("signalled: %+v %v", o, err)
	}
	// A message outside the protocol ends the command, with an error.
	term, err = c.Terminal(ctx, sb.ID, client.TerminalOptions{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Signal("SIGSEGV"); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Wait(io.Discard); err == nil || !strings.Contains(err.Error(), "is not one a terminal sends") {
		t.Errorf("a signal not allowed: %v", err)
	}
	if _, err := c.Terminal(ctx, sb.ID, client.TerminalOptions{Rows: 5000}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("rows 5000: %v", err)
	}
	if _, err := s.client("ops").Terminal(ctx, sb.ID, client.TerminalOptions{}); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("an admin's token: %v", err)
	}
	if !audited(t, s, sb.ID, "exec", `"argv":["/bin/sh"]`) || !audited(t, s, sb.ID, "exec", `"terminal":true`) {
		t.Error("the audit log has no record of the terminal's command")
	}
	if !audited(t, s, sb.ID, "result", `stdin-is-a-tty`) {
		t.Error("the audit log has no capture of the terminal's output")
	}
}

// TestServePorts reaches a server started inside a sandbox through the
// forwarded port: HTTP and a WebSocket, the token not forwarded, the
// answer confined to an opaque origin, other agents kept out, and the
// connections per sandbox bounded.
func TestServePorts(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "portserver")
	build := exec.Command("go", "build", "-o", bin, "./testdata/portserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the port server: %v\n%s", err, out)
	}
	s := startServe(t, "  web:\n    profile: web.yaml\n  other:\n    profile: other.yaml\n", map[string]string{
		"web.yaml":   testProfile("web", "  wall: 1m\n"),
		"other.yaml": testProfile("other", "  wall: 1m\n"),
	})
	ctx := context.Background()
	c := s.client("web")
	sb, err := c.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.Upload(ctx, sb.ID, "/workspace/portserver", f, 0o755); err != nil {
		t.Fatal(err)
	}
	// Started in a session of its own (which outlives the command), and
	// listening once its port is in /proc/net/tcp (8000 is 1F40).
	start := "setsid ./portserver 8000 </dev/null >/dev/null 2>server.log & for i in $(seq 1 3000); do grep -q ':1F40 ' /proc/net/tcp && exit 0; sleep 0.02; done; cat server.log; exit 1"
	if res, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"sh", "-c", start}}); err != nil || res.Outcome.Status != outcome.OK {
		t.Fatalf("the server did not listen: %s %+v %v", res.Stdout, res.Outcome, err)
	}
	get := func(c *client.Client, path string) (string, *http.Response, error) {
		hc := &http.Client{Transport: addCookie{}}
		c.HTTP = hc
		resp, err := c.Port(ctx, sb.ID, 8000, "GET", path, nil)
		if err != nil {
			return "", nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp, nil
	}
	var body string
	var resp *http.Response
	if body, resp, err = get(c, "hello/x?q=1"); err != nil {
		t.Fatalf("the server in the sandbox did not answer: %v", err)
	}
	if body != `GET /hello/x q=1 authorization="" cookie="" host=127.0.0.1:8000`+"\n" {
		t.Errorf("forwarded: %q", body)
	}
	if resp.Header.Get("Set-Cookie") != "" || !strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "sandbox ") {
		t.Errorf("headers of the answer: %v", resp.Header)
	}
	if _, _, err := get(s.client("ops"), "hello/admin"); err != nil {
		t.Errorf("an admin's token: %v", err)
	}
	if _, _, err := get(s.client("other"), "hello/other"); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("another agent's token: %v", err)
	}
	if _, _, err := get(client.New(s.url, ""), "hello/none"); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Errorf("no token: %v", err)
	}
	for port, status := range map[int]int{8001: http.StatusBadGateway, 0: http.StatusBadRequest, 70000: http.StatusBadRequest} {
		if resp, err := c.Port(ctx, sb.ID, port, "GET", "", nil); !client.IsStatus(err, status) {
			if resp != nil {
				resp.Body.Close()
			}
			t.Errorf("port %d: %v, want %d", port, err, status)
		}
	}
	// WebSockets: echoed, and at most 32 forwarded connections at once.
	dial := func() (*websocket.Conn, error) {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.PortURL(sb.ID, 8000, "echo"), "http"),
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.tokens["web"]}}})
		return ws, err
	}
	var open []*websocket.Conn
	defer func() {
		for _, ws := range open {
			ws.CloseNow()
		}
	}()
	for i := 0; i < 32; i++ {
		ws, err := dial()
		if err != nil {
			t.Fatalf("WebSocket %d: %v", i, err)
		}
		open = append(open, ws)
	}
	if err := open[0].Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := open[0].Read(ctx); err != nil || string(b) != "echo: hi" {
		t.Errorf("echo: %q %v", b, err)
	}
	if _, _, err := get(c, "hello/33rd"); !client.IsStatus(err, http.StatusTooManyRequests) {
		t.Errorf("a 33rd connection: %v", err)
	}
	open[0].Close(websocket.StatusNormalClosure, "")
	open = open[1:]
	for i := 0; ; i++ {
		if _, _, err = get(c, "hello/again"); err == nil {
			break
		}
		if i == 500 || !client.IsStatus(err, http.StatusTooManyRequests) {
			t.Fatalf("after a WebSocket closed: %v", err)
		}
	}
	if !audited(t, s, sb.ID, "port_forward", `"method":"GET","path":"/hello/x","port":8000,"status":200`) {
		t.Error("the audit log has no record of the forwarded request")
	}
}

// addCookie sends every request with a cookie.
type addCookie struct{}

func (addCookie) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Cookie", "cordon=secret")
	return http.DefaultTransport.RoundTrip(r)
}
