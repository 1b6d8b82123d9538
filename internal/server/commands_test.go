package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// cmdBox is a fake sandbox whose commands run run.
type cmdBox struct {
	run  func(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error)
	done chan struct{}
	once sync.Once
}

func (b *cmdBox) Exec(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	return b.run(ctx, e)
}
func (b *cmdBox) Close()                { b.once.Do(func() { close(b.done) }) }
func (b *cmdBox) Done() <-chan struct{} { return b.done }
func (b *cmdBox) Why() string           { return "" }

func okOutcome() outcome.Outcome {
	code := 0
	return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code, Message: "ok"}
}

// newCmdFixture is a fixture whose sandboxes run run, with the commands'
// bounds cmds; it returns the spool directory too.
func newCmdFixture(t *testing.T, p *profile.Profile, cmds Commands, run func(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error)) (*fixture, string) {
	return newCmdFixtureHTTP(t, p, cmds, HTTPLimits{}, run)
}

// newCmdFixtureHTTP is newCmdFixture with the HTTP server's limits h.
func newCmdFixtureHTTP(t *testing.T, p *profile.Profile, cmds Commands, h HTTPLimits, run func(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error)) (*fixture, string) {
	t.Helper()
	spool := filepath.Join(t.TempDir(), "spool")
	f := newFixtureWith(t, 0, p, nil, nil, func(o *Options) {
		o.Config.Commands = cmds
		if h.WriteTimeout != "" {
			o.Config.HTTP.WriteTimeout = h.WriteTimeout
		}
		o.SpoolDir = spool
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			return &cmdBox{run: run, done: make(chan struct{})}, nil
		}
	})
	return f, spool
}

// running returns the commands counted now: in sandbox id, of agent, and
// in all.
func (s *Server) running(agent, id string) (sandbox, ofAgent, total int) {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return s.slots.sandbox[id], s.slots.agent[agent], s.slots.total
}

// pattern is the bytes a command of the tests writes: a stream of its own
// for each seed.
func pattern(seed uint64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return rand.NewChaCha8(key)
}

// write copies n bytes of r to w, until ctx ends.
func write(ctx context.Context, w io.Writer, r io.Reader, n int64) {
	buf := make([]byte, 32<<10)
	for n > 0 && ctx.Err() == nil {
		k := int(min(n, int64(len(buf))))
		io.ReadFull(r, buf[:k])
		w.Write(buf[:k])
		n -= int64(k)
	}
}

// bigRun runs the commands of the tests: "big SEED OUT ERR" writes OUT
// bytes of pattern(SEED) to stdout and ERR of pattern(SEED+1) to stderr;
// "block" waits for its caller to go; "stdin" prints the size of its
// input.
func bigRun(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	switch e.Args[0] {
	case "big":
		seed, _ := strconv.ParseUint(e.Args[1], 10, 64)
		nOut, _ := strconv.ParseInt(e.Args[2], 10, 64)
		nErr, _ := strconv.ParseInt(e.Args[3], 10, 64)
		write(ctx, e.Stdout, pattern(seed), nOut)
		write(ctx, e.Stderr, pattern(seed+1), nErr)
	case "block":
		<-ctx.Done()
	case "stdin":
		n, _ := io.Copy(io.Discard, e.Stdin)
		fmt.Fprint(e.Stdout, n)
	}
	return okOutcome(), nil
}

// post sends a request with the token of name.
func (f *fixture) post(ctx context.Context, t *testing.T, name, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.tokens[name])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// untilQuote reads a JSON string's contents, up to its closing quote.
type untilQuote struct {
	br   *bufio.Reader
	done bool
}

func (u *untilQuote) Read(p []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	if _, err := u.br.Peek(1); err != nil {
		return 0, err
	}
	buf, _ := u.br.Peek(min(len(p), u.br.Buffered()))
	if i := bytes.IndexByte(buf, '"'); i >= 0 {
		n := copy(p, buf[:i])
		u.br.Discard(i + 1)
		u.done = true
		return n, nil
	}
	n := copy(p, buf)
	u.br.Discard(n)
	return n, nil
}

// expect reads the literal s.
func expect(br *bufio.Reader, s string) error {
	got := make([]byte, len(s))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != s {
		return fmt.Errorf("answer: want %q, found %q (%v)", s, got, err)
	}
	return nil
}

// sameStream checks that got holds exactly n bytes, those of want,
// holding neither.
func sameStream(got, want io.Reader, n int64) error {
	a, b := make([]byte, 32<<10), make([]byte, 32<<10)
	var seen int64
	for {
		k, err := io.ReadFull(got, a)
		if k > 0 {
			io.ReadFull(want, b[:k])
			if !bytes.Equal(a[:k], b[:k]) {
				return fmt.Errorf("the output differs in the %d bytes from %d", k, seen)
			}
			seen += int64(k)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if seen != n {
		return fmt.Errorf("got %d bytes of output, want %d", seen, n)
	}
	return nil
}

// checkAnswer reads an answer of a command of bigRun as it comes, without
// holding it, and checks every byte.
func checkOutput(br *bufio.Reader, seed uint64, nOut, nErr int64) (outcome.Outcome, error) {
	var o outcome.Outcome
	if err := expect(br, `{"stdout":"`); err != nil {
		return o, err
	}
	if err := sameStream(base64.NewDecoder(base64.StdEncoding, &untilQuote{br: br}), pattern(seed), nOut); err != nil {
		return o, fmt.Errorf("stdout: %w", err)
	}
	if err := expect(br, `,"stderr":"`); err != nil {
		return o, err
	}
	if err := sameStream(base64.NewDecoder(base64.StdEncoding, &untilQuote{br: br}), pattern(seed+1), nErr); err != nil {
		return o, fmt.Errorf("stderr: %w", err)
	}
	if err := expect(br, `,"outcome":`); err != nil {
		return o, err
	}
	err := json.NewDecoder(br).Decode(&o)
	return o, err
}

// spoolFiles counts the files of dir this process holds open.
func spoolFiles(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// Many commands with large output at once, answered to clients that read
// slowly: the server's heap stays under a fixed budget however large the
// output (it waits in spool files, not in memory), and every byte
// arrives.
func TestBufferedOutputMemory(t *testing.T) {
	const (
		k      = 8
		nOut   = 8 << 20
		nErr   = 1 << 20
		budget = 16 << 20 // against k*(nOut+nErr) = 72 MiB of output
	)
	f, spool := newCmdFixture(t, nil, Commands{}, bigRun)
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, during, after runtime.MemStats
	runtime.ReadMemStats(&before)
	gate := make(chan struct{})
	var begun sync.WaitGroup
	begun.Add(k)
	errs := make(chan error, k)
	for i := range k {
		go func() {
			seed := uint64(10 * (i + 1))
			body := fmt.Sprintf(`{"args":["big","%d","%d","%d"]}`, seed, nOut, nErr)
			resp := f.post(ctx, t, "alice-a", "POST", api.Version+"/sandboxes/"+sb.ID+"/exec", body)
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 4<<10)
			_, err := br.Peek(1) // the answer began: its command has ended
			begun.Done()
			if err != nil || resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("command %d: status %d, %v", i, resp.StatusCode, err)
				return
			}
			<-gate
			o, err := checkOutput(br, seed, nOut, nErr)
			if err == nil && o.Status != outcome.OK {
				err = fmt.Errorf("outcome %+v", o)
			}
			errs <- err
		}()
	}
	begun.Wait()
	runtime.GC()
	runtime.ReadMemStats(&during)
	open := spoolFiles(t, spool)
	entries, _ := os.ReadDir(spool)
	close(gate)
	for range k {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	runtime.ReadMemStats(&after)
	grown := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d commands of %d MiB each: heap grew by %.1f MiB while answering; %.1f MiB allocated per command; %d spool files open", k, (nOut+nErr)>>20, float64(grown)/(1<<20), float64(after.TotalAlloc-before.TotalAlloc)/k/(1<<20), open)
	if grown > budget {
		t.Errorf("the heap grew by %d bytes while the answers were read, more than %d", grown, budget)
	}
	if open != 2*k || len(entries) != 0 {
		t.Errorf("while the answers were read: %d spool files open (want %d), %d names in the spool directory (want none: unlinked)", open, 2*k, len(entries))
	}
	waitFor(t, "the spool files to be closed", func() bool { return spoolFiles(t, spool) == 0 })
	if st, err := os.Stat(spool); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("spool directory: %v %v, want 0700", st.Mode(), err)
	}
}

// The answer with a first command, and through the Go client: the same
// bytes, from memory and spool alike.
func TestBufferedOutputThroughTheClient(t *testing.T) {
	f, _ := newCmdFixture(t, nil, Commands{}, bigRun)
	ctx := context.Background()
	a := f.client("alice-a")
	for _, n := range []int64{0, 1, spoolMem - 1, spoolMem, spoolMem + 1, 3*spoolMem + 7} {
		sb, err := a.CreateAndRun(ctx, api.ExecRequest{Args: []string{"big", "7", fmt.Sprint(n), fmt.Sprint(n / 2)}})
		if err != nil || sb.Result == nil || sb.ID == "" || sb.State != "running" {
			t.Fatalf("create with %d bytes: %+v %v", n, sb, err)
		}
		for _, res := range []api.ExecResult{*sb.Result, must(a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"big", "7", fmt.Sprint(n), fmt.Sprint(n / 2)}}))} {
			if err := sameStream(bytes.NewReader(res.Stdout), pattern(7), n); err != nil {
				t.Errorf("%d bytes: stdout: %v", n, err)
			}
			if err := sameStream(bytes.NewReader(res.Stderr), pattern(8), n/2); err != nil {
				t.Errorf("%d bytes: stderr: %v", n, err)
			}
			if res.Outcome.Status != outcome.OK || len(res.Outcome.Notes) != 0 {
				t.Errorf("%d bytes: outcome %+v", n, res.Outcome)
			}
		}
		a.Kill(ctx, sb.ID)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// What the server keeps of a command's output is bounded: by the
// profile's output limit (whatever the sandbox lets through), and by
// commands.max_output below it, which stops the command.
func TestBufferedOutputBounded(t *testing.T) {
	p := profile.Default()
	if err := p.SetLimit("output", "1MiB"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		max  string
		kept int64
		note string
	}{
		{"profile", "", 1<<20 + outputSlack, "passed the profile's output limit"},
		{"max_output", "256KiB", 256 << 10, "commands.max_output"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stopped := make(chan bool, 1)
			f, _ := newCmdFixture(t, p, Commands{MaxOutput: tt.max}, func(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
				write(ctx, e.Stdout, pattern(1), 8<<20)
				stopped <- ctx.Err() != nil
				return okOutcome(), nil
			})
			ctx := context.Background()
			a := f.client("alice-a")
			sb := must(a.Create(ctx, ""))
			res, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"x"}})
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(res.Stdout)) != tt.kept || sameStream(bytes.NewReader(res.Stdout), pattern(1), tt.kept) != nil {
				t.Errorf("kept %d bytes, want the first %d", len(res.Stdout), tt.kept)
			}
			if !<-stopped {
				t.Error("the command was not stopped")
			}
			if !strings.Contains(strings.Join(res.Outcome.Notes, "\n"), tt.note) {
				t.Errorf("notes %q, want %q", res.Outcome.Notes, tt.note)
			}
			log, _ := os.ReadFile(f.log)
			if !strings.Contains(string(log), tt.note) {
				t.Errorf("the recorded outcome lacks the note %q", tt.note)
			}
		})
	}
}

// Caps on running commands: per sandbox, per agent, per server, files
// included; 429 naming the cap before anything is read, recorded or run;
// a slot is freed when its command ends, also when its client goes.
func TestCommandCaps(t *testing.T) {
	f, _ := newCmdFixture(t, nil, Commands{PerSandbox: 2, PerAgent: 3, PerServer: 4}, bigRun)
	ctx := context.Background()
	a, b := f.client("alice-a"), f.client("bob-b")
	s1, s2, s3 := must(a.Create(ctx, "")), must(a.Create(ctx, "")), must(b.Create(ctx, ""))
	type running struct {
		cancel context.CancelFunc
		done   chan error
	}
	block := func(c *client.Client, id string) running {
		ctx, cancel := context.WithCancel(context.Background())
		r := running{cancel, make(chan error, 1)}
		go func() {
			_, err := c.Run(ctx, id, api.ExecRequest{Args: []string{"block"}})
			r.done <- err
		}()
		t.Cleanup(cancel)
		return r
	}
	waitRunning := func(agent, id string, inSandbox, ofAgent, total int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d commands in %s, %d of agent %s, %d in all", inSandbox, id, ofAgent, agent, total), func() bool {
			x, y, z := f.srv.running(agent, id)
			return x == inSandbox && y == ofAgent && z == total
		})
	}
	refused := func(what string, err error, cap string) {
		t.Helper()
		if !client.IsStatus(err, http.StatusTooManyRequests) || !strings.Contains(err.Error(), "commands."+cap) {
			t.Errorf("%s: got %v, want 429 naming commands.%s", what, err, cap)
		}
	}
	run := func(c *client.Client, id string) error {
		_, err := c.Run(ctx, id, api.ExecRequest{Args: []string{"true"}})
		return err
	}
	execs := func() int {
		data, _ := os.ReadFile(f.log)
		return strings.Count(string(data), `"kind":"action","type":"exec"`)
	}

	r1, r2 := block(a, s1.ID), block(a, s1.ID)
	waitRunning("a", s1.ID, 2, 2, 2)
	refused("exec in a full sandbox", run(a, s1.ID), "per_sandbox")
	refused("upload to a full sandbox", a.Upload(ctx, s1.ID, "/tmp/x", strings.NewReader("x"), 0), "per_sandbox")
	// Refused before its body is read: a bad one is not even looked at.
	resp := f.post(ctx, t, "alice-a", "POST", api.Version+"/sandboxes/"+s1.ID+"/exec", "not json")
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a bad body to a full sandbox: %d %v, want 429 with Retry-After", resp.StatusCode, resp.Header)
	}

	r3 := block(a, s2.ID)
	waitRunning("a", s2.ID, 1, 3, 3)
	refused("exec for an agent at its cap", run(a, s2.ID), "per_agent")
	refused("download for an agent at its cap", a.Download(ctx, s2.ID, "/etc/hostname", io.Discard), "per_agent")
	_, err := a.CreateAndRun(ctx, api.ExecRequest{Args: []string{"true"}})
	refused("create with a command for an agent at its cap", err, "per_agent")

	r4 := block(b, s3.ID)
	waitRunning("b", s3.ID, 1, 1, 4)
	refused("exec in a server at its cap", run(b, s3.ID), "per_server")
	if got := execs(); got != 4 {
		t.Errorf("refused commands were recorded: %d exec records, want 4", got)
	}
	m := f.metrics(t)
	for _, want := range []string{
		`cordon_commands_refused_total{agent="a",cap="per_sandbox"} 3`,
		`cordon_commands_refused_total{agent="a",cap="per_agent"} 3`,
		`cordon_commands_refused_total{agent="b",cap="per_server"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// A client that goes mid-command frees its slot, once the command
	// ends; and the command is on the record.
	r1.cancel()
	<-r1.done
	waitRunning("a", s1.ID, 1, 2, 3)
	if err := run(a, s1.ID); err != nil {
		t.Errorf("exec once a slot is free: %v", err)
	}
	if err := run(b, s3.ID); err != nil {
		t.Errorf("exec of b once a slot is free: %v", err)
	}
	for _, r := range []running{r2, r3, r4} {
		r.cancel()
		<-r.done
	}
	waitRunning("a", s1.ID, 0, 0, 0)
	// Files take slots and give them back.
	for i := range 3 {
		if err := a.Upload(ctx, s1.ID, "/tmp/x", strings.NewReader("x"), 0); err != nil {
			t.Errorf("upload %d: %v", i, err)
		}
		if err := a.Download(ctx, s1.ID, "/tmp/x", io.Discard); err != nil {
			t.Errorf("download %d: %v", i, err)
		}
	}
	waitRunning("a", s1.ID, 0, 0, 0)
	data, _ := os.ReadFile(f.log)
	if got := strings.Count(string(data), "the command was cancelled") + strings.Count(string(data), `"type":"outcome"`); got < 6 {
		t.Errorf("%d outcomes recorded, want 6", got)
	}
}

// Stdin is bounded by commands.max_stdin: 413, naming it and the files
// API, whether the body says its length or not.
func TestStdinBounded(t *testing.T) {
	f, _ := newCmdFixture(t, nil, Commands{MaxStdin: "1KiB"}, bigRun)
	ctx := context.Background()
	a := f.client("alice-a")
	sb := must(a.Create(ctx, ""))
	res, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"stdin"}, Stdin: make([]byte, 1024)})
	if err != nil || string(res.Stdout) != "1024" {
		t.Fatalf("stdin at the cap: %q %v", res.Stdout, err)
	}
	for _, n := range []int{1025, 64 << 10, 4 << 20} {
		_, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"stdin"}, Stdin: make([]byte, n)})
		if !client.IsStatus(err, http.StatusRequestEntityTooLarge) || !strings.Contains(err.Error(), "commands.max_stdin") || !strings.Contains(err.Error(), "/files") {
			t.Errorf("stdin of %d bytes: %v, want 413 naming commands.max_stdin and the files API", n, err)
		}
		_, err = a.CreateAndRun(ctx, api.ExecRequest{Args: []string{"stdin"}, Stdin: make([]byte, n)})
		if !client.IsStatus(err, http.StatusRequestEntityTooLarge) {
			t.Errorf("create with stdin of %d bytes: %v, want 413", n, err)
		}
	}
	// Without a length: the body is cut where it passes the bound.
	body := `{"args":["stdin"],"stdin":"` + strings.Repeat("A", int(execBody(1024))) + `"}`
	req, _ := http.NewRequest("POST", f.url+api.Version+"/sandboxes/"+sb.ID+"/exec", io.MultiReader(strings.NewReader(body)))
	req.Header.Set("Authorization", "Bearer "+f.tokens["alice-a"])
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body past the bound: %d, want 413", resp.StatusCode)
	}
}

// stalledConn sends a request and reads nothing of its answer, with a
// small receive buffer: the server's writes soon block.
func stalledConn(t *testing.T, f *fixture, method, path, body string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", method, path, f.tokens["alice-a"], len(body), body)
	return conn
}

// A client that stops reading holds neither the command nor its slot:
// past the send timeout it is taken as gone (the command is stopped, as
// when a client disconnects), and the outcome is recorded; streamed,
// buffered or downloaded.
func TestStalledReader(t *testing.T) {
	const n = 32 << 20
	for _, tt := range []struct {
		name, method, path, body string
	}{
		{"stream", "POST", "/exec", fmt.Sprintf(`{"args":["big","1","%d","0"],"stream":true}`, n)},
		{"buffered", "POST", "/exec", fmt.Sprintf(`{"args":["big","1","%d","0"]}`, n)},
		{"download", "GET", "/files?path=/big", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ended := make(chan error, 1)
			f, _ := newCmdFixtureHTTP(t, nil, Commands{}, HTTPLimits{WriteTimeout: "200ms"}, func(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
				if e.SelfExec {
					e.Args = []string{"big", "1", fmt.Sprint(n), "0"}
				}
				o, err := bigRun(ctx, e)
				ended <- nil
				return o, err
			})
			ctx := context.Background()
			sb := must(f.client("alice-a").Create(ctx, ""))
			stalledConn(t, f, tt.method, api.Version+"/sandboxes/"+sb.ID+tt.path, tt.body)
			select {
			case <-ended:
			case <-time.After(time.Minute): // a bound, not a measure
				t.Fatal("the command is held by a client that does not read")
			}
			waitFor(t, "the command's slot to be freed", func() bool { _, _, total := f.srv.running("a", sb.ID); return total == 0 })
			waitFor(t, "its record", func() bool {
				data, _ := os.ReadFile(f.log)
				return strings.Contains(string(data), `"type":"outcome"`) || strings.Contains(string(data), `"type":"files.read"`)
			})
		})
	}
}

// The serve configuration's commands: defaults, and errors that name the
// field.
func TestCommandsConfig(t *testing.T) {
	dir := t.TempDir()
	_, sum := NewToken()
	path := filepath.Join(dir, "serve.yaml")
	load := func(commands string) (*Config, error) {
		os.WriteFile(path, []byte(commands+"agents:\n  a:\n    profile: default\ntokens:\n  - name: t\n    agent: a\n    sha256: "+sum+"\n"), 0o644)
		return LoadConfig(path)
	}
	c, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Commands; got.PerSandbox != 8 || got.PerAgent != 32 || got.PerServer != 128 || got.Stdin != 8<<20 || got.Output != 64<<20 {
		t.Errorf("defaults: %+v", got)
	}
	c, err = load("commands:\n  per_sandbox: 2\n  max_stdin: 1MiB\n  max_output: 2MiB\n")
	if err != nil || c.Commands.PerSandbox != 2 || c.Commands.Stdin != 1<<20 || c.Commands.Output != 2<<20 {
		t.Errorf("set: %+v %v", c.Commands, err)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"commands:\n  per_agent: -1\n", "serve.yaml:2:14: commands.per_agent: want a number of commands of at least 1"},
		{"commands:\n  max_stdin: lots\n", `serve.yaml:2:14: commands.max_stdin: want a size`},
		{"commands:\n  max_output: 1\n", `commands.max_output: want a size from 1KiB`},
		{"commands:\n  per_host: 1\n", `unknown field "per_host"`},
	} {
		if _, err := load(tt.yaml); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.yaml, err, tt.want)
		}
	}
}
