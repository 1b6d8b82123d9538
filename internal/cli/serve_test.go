package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/cli"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/server"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// served is a cordon serve started by a test, from the real binary.
type served struct {
	cmd    *exec.Cmd
	url    string
	dir    string
	tokens map[string]string // name -> token
	log    *lockedBuffer
}

// startServe writes the configuration (agents, in YAML, indented under
// agents:), with a token per agent named after it and an admin's named
// "ops", and starts cordon serve on it.
// serveArgs are flags startServeWith adds to cordon serve's (no test of
// this package runs in parallel).
var serveArgs []string

func startServe(t *testing.T, agents string, files map[string]string) *served {
	t.Helper()
	return startServeWith(t, agents, files, "", nil)
}

// startServeWith is startServe with top-level configuration lines, and the
// tokens (name -> token) to use instead of new ones; {{listen}} in them
// is the address the server will listen on.
func startServeWith(t *testing.T, agents string, files map[string]string, top string, tokens map[string]string) *served {
	t.Helper()
	if exec.Command(filepath.Join(binDir, "cordon"), "doctor").Run() != nil {
		t.Skip("this host cannot run cordon sandboxes")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &served{dir: dir, tokens: map[string]string{}, log: &lockedBuffer{}}
	var cfg strings.Builder
	cfg.WriteString(top + "agents:\n" + agents + "tokens:\n")
	names := []string{"ops"}
	for _, line := range strings.Split(agents, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			names = append(names, strings.TrimSuffix(strings.TrimSpace(line), ":"))
		}
	}
	for _, name := range names {
		token, sum := server.NewToken()
		if tokens != nil && tokens[name] != "" {
			token, sum = tokens[name], server.HashToken(tokens[name])
		}
		s.tokens[name] = token
		if name == "ops" {
			fmt.Fprintf(&cfg, "  - name: ops\n    admin: true\n    sha256: %s\n", sum)
		} else {
			fmt.Fprintf(&cfg, "  - name: %s-token\n    agent: %s\n    sha256: %s\n", name, name, sum)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// {{listen}} in the configuration is the address the server listens on.
	if err := os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte(strings.ReplaceAll(cfg.String(), "{{listen}}", addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + addr
	s.cmd = exec.Command(filepath.Join(binDir, "cordon"), append([]string{"serve", "--config", filepath.Join(dir, "serve.yaml"), "--listen", addr}, serveArgs...)...)
	s.cmd.Env = append(os.Environ(), "CORDON_STATE_DIR="+filepath.Join(dir, "state"), "CORDON_AUDIT_LOG="+filepath.Join(dir, "audit", "audit.jsonl"), "HOME="+dir)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(t) })
	c := s.client("ops")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Health(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cordon serve did not answer:\n%s", s.log)
		}
	}
	return s
}

func (s *served) client(name string) *client.Client { return client.New(s.url, s.tokens[name]) }

// stop ends the server as an operator would (SIGTERM) and waits for it.
func (s *served) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cordon serve: %v\n%s", err, s.log)
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
		t.Errorf("cordon serve did not stop within 30s of SIGTERM\n%s", s.log)
	}
}

// children lists the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok && strings.TrimSpace(v) == strconv.Itoa(pid) {
				out = append(out, n)
			}
		}
	}
	return out
}

// leftovers names what a stopped server left: its children still
// running, its cgroups, its private workspaces.
func (s *served) leftovers(kids []int) []string {
	var out []string
	for _, k := range kids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k)); err == nil && strings.Contains(string(b), "cordon") {
			out = append(out, fmt.Sprintf("process %d (%s)", k, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	pattern := fmt.Sprintf("cordon-%d-", s.cmd.Process.Pid)
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), pattern) {
			out = append(out, "cgroup "+p)
			return filepath.SkipDir
		}
		return nil
	})
	ents, _ := os.ReadDir(filepath.Join(s.dir, "state", "serve", "sandboxes"))
	for _, e := range ents {
		out = append(out, "workspace "+e.Name())
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), s.dir) {
		out = append(out, "a mount under "+s.dir)
	}
	return out
}

func TestServeSandboxKeptAlive(t *testing.T) {
	s := startServe(t, `  builder:
    profile: builder.yaml
    pool: 2
  greedy:
    profile: greedy.yaml
`, map[string]string{
		"builder.yaml": testProfile("builder", "  wall: 2s\n  output: 4KiB\n  file_size: 1MiB\n"),
		"greedy.yaml":  testProfile("greedy", "  memory: 64MiB\n"),
	})
	ctx := context.Background()
	c := s.client("builder")
	waitUntil(t, "the pool to fill", func() bool { h, _ := c.Health(ctx); return h.Warm == 2 })
	sb, err := c.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Warm {
		t.Errorf("the first sandbox was not pre-warmed: %+v", sb)
	}
	run := func(args ...string) (string, outcome.Outcome) {
		t.Helper()
		var out, errb bytes.Buffer
		o, err := c.Exec(ctx, sb.ID, api.ExecRequest{Args: args}, &out, &errb)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String() + errb.String(), o
	}
	// What one command leaves in files, the next one finds; processes end
	// with their command.
	if out, o := run("sh", "-c", "pwd; id -u; echo kept > state.txt; sleep 300 & echo started"); o.Status != outcome.OK || out != "/workspace\n1000\nstarted\n" {
		t.Fatalf("first command: %q %+v", out, o)
	}
	if out, o := run("sh", "-c", "cat state.txt; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"); o.Status != outcome.OK || !strings.HasPrefix(out, "kept\n") || strings.Contains(out, "sleep 300") {
		t.Fatalf("second command: %q %+v", out, o)
	}
	// A command can signal the sandbox's init but not end it: the next
	// command runs in the same sandbox.
	if out, o := run("sh", "-c", "for n in $(seq 1 64); do case $n in 1|2|3|10|12|15|18|28) continue;; esac; kill -$n 1; done; sleep 0.3; echo sent"); o.Status != outcome.OK || out != "sent\n" {
		t.Fatalf("signals to init: %q %+v", out, o)
	}
	// Files move through the sandbox, within what it may reach.
	if err := c.Upload(ctx, sb.ID, "/workspace/in.txt", strings.NewReader("uploaded\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := run("sh", "-c", "stat -c %a in.txt; cat in.txt > out.txt"); out != "600\n" {
		t.Fatalf("upload: %q", out)
	}
	var got bytes.Buffer
	if err := c.Download(ctx, sb.ID, "/workspace/out.txt", &got); err != nil || got.String() != "uploaded\n" {
		t.Fatalf("download: %q %v", got.String(), err)
	}
	for _, tt := range []struct {
		err    error
		status int
	}{
		{c.Download(ctx, sb.ID, "/etc/shadow", &got), 404},
		{c.Download(ctx, sb.ID, "/proc/1/environ", &got), 403},
		{c.Upload(ctx, sb.ID, "/usr/bin/evil", strings.NewReader("x"), 0), 403},
		{c.Upload(ctx, sb.ID, "/workspace/../../etc/passwd", strings.NewReader("x"), 0), 403},
		// Over the file size limit, refused before anything is written.
		{c.Upload(ctx, sb.ID, "/workspace/big", strings.NewReader(strings.Repeat("x", 1<<20+1)), 0), 413},
		{c.Upload(ctx, sb.ID, "/workspace/big", io.MultiReader(strings.NewReader(strings.Repeat("x", 1<<20+1))), 0), 413},
	} {
		if !client.IsStatus(tt.err, tt.status) {
			t.Errorf("got %v, want status %d", tt.err, tt.status)
		}
	}
	if _, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"echo", strings.Repeat("a", 200<<10)}}); !client.IsStatus(err, 413) {
		t.Errorf("an argument over 128 KiB: %v", err)
	}
	if out, _ := run("sh", "-c", "ls /workspace"); strings.Contains(out, "big") {
		t.Errorf("an upload over the limit was written: %q", out)
	}
	// Per-command limits end the command, and the sandbox goes on.
	if _, o := run("sh", "-c", "yes | head -c 100000"); o.Status != outcome.OutputLimit {
		t.Errorf("output: %+v", o)
	}
	if _, o := run("sleep", "30"); o.Status != outcome.Timeout || o.Limit == nil || o.Limit.Value != "2s" {
		t.Errorf("wall: %+v", o)
	}
	if out, o := run("cat", "state.txt"); o.Status != outcome.OK || out != "kept\n" {
		t.Errorf("after the limits: %q %+v", out, o)
	}
	// The agent's token reaches neither another agent's profile nor its
	// sandboxes; the other's token not this one.
	if _, err := c.Create(ctx, "greedy"); !client.IsStatus(err, 403) {
		t.Errorf("builder creating greedy's: %v", err)
	}
	g := s.client("greedy")
	gsb, err := g.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, gsb.ID); !client.IsStatus(err, 404) {
		t.Errorf("builder reading greedy's sandbox: %v", err)
	}
	if _, err := g.Kill(ctx, sb.ID); !client.IsStatus(err, 404) {
		t.Errorf("greedy killing builder's sandbox: %v", err)
	}
	// A sandbox-wide limit ends the sandbox, reported as that limit.
	o, err := g.Exec(ctx, gsb.ID, api.ExecRequest{Args: []string{"python3", "-c", "x = bytearray(256 << 20)"}}, nil, nil)
	if err != nil || o.Status != outcome.MemoryLimit {
		t.Fatalf("memory: %+v %v", o, err)
	}
	waitUntil(t, "the greedy sandbox to end", func() bool { got, _ := g.Get(ctx, gsb.ID); return got.Ended == "memory" })
	if _, err := g.Run(ctx, gsb.ID, api.ExecRequest{Args: []string{"true"}}); !client.IsStatus(err, 410) {
		t.Errorf("a command in the ended sandbox: %v", err)
	}
	// cordon run --server: a sandbox for one command, its status passed on.
	cmd := exec.Command(filepath.Join(binDir, "cordon"), "run", "--server", s.url, "--", "sh", "-c", "cat; exit 7")
	cmd.Env = append(os.Environ(), "CORDON_TOKEN="+s.tokens["builder"])
	cmd.Stdin = strings.NewReader("from stdin\n")
	out, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 7 || string(out) != "from stdin\n" {
		t.Errorf("run --server: %q, exit %d (%v)", out, code, err)
	}
	cmd = exec.Command(filepath.Join(binDir, "cordon"), "run", "--server", s.url, "--", "true")
	cmd.Env = append(os.Environ(), "CORDON_TOKEN=cordon_wrong")
	if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != cli.ExitCordon || !strings.Contains(string(out), "401") {
		t.Errorf("run --server with a wrong token: %q, exit %d", out, cmd.ProcessState.ExitCode())
	}

	kids := children(s.cmd.Process.Pid)
	s.stop(t)
	if left := s.leftovers(kids); len(left) > 0 {
		t.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	verify := exec.Command(filepath.Join(binDir, "cordon"), "audit", "verify", "--log", filepath.Join(s.dir, "audit", "audit.jsonl"))
	if out, err := verify.CombinedOutput(); err != nil {
		t.Errorf("audit verify: %v\n%s", err, out)
	}
}

// testProfile is a profile for agent with a shell, Python, a private
// workspace, and resources (YAML lines under resources:).
func testProfile(agent, resources string) string {
	return "version: 1\nagent: " + agent + `
workspace:
  path: .
  writable: true
mounts:
  - path: /usr
  - path: /bin
  - path: /lib
  - path: /lib64
    optional: true
env:
  set:
    PATH: /usr/bin:/bin
resources:
` + resources
}

// TestServeLoad runs 1000 commands across 64 sandboxes at once: every
// command gets its outcome, and nothing is left afterwards. It reports
// the memory an idle sandbox costs.
func TestServeLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const sandboxes, commands = 64, 1000
	s := startServe(t, fmt.Sprintf("  worker:\n    profile: default\n    pool: %d\n    max_sandboxes: %d\n", sandboxes, sandboxes), nil)
	ctx := context.Background()
	c := s.client("worker")
	// 429 is the server's back-pressure, which the client waits out: on a
	// busy machine, more often than its default.
	c.Retry = client.RetryPolicy{MaxRetries: 100, MaxWait: 10 * time.Minute}
	before := pss(s.cmd.Process.Pid)
	waitUntil(t, "the pool to fill", func() bool { h, _ := c.Health(ctx); return h.Warm == sandboxes })
	after := pss(s.cmd.Process.Pid)
	t.Logf("memory per idle sandbox: %.1f MiB (proportional set size of the server and its processes, %d sandboxes)", float64(after-before)/sandboxes/(1<<20), sandboxes)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	done := 0
	for i := 0; i < sandboxes; i++ {
		n := commands / sandboxes
		if i < commands%sandboxes {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.Create(ctx, "")
			if err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				return
			}
			for j := 0; j < n; j++ {
				want := fmt.Sprintf("%d.%d", i, j)
				res, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"echo", want}})
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case res.Outcome.Status != outcome.OK || string(res.Stdout) != want+"\n":
					failures = append(failures, fmt.Sprintf("%s: %q %s", want, res.Stdout, res.Outcome.Message))
				default:
					done++
				}
				mu.Unlock()
			}
			if _, err := c.Kill(ctx, sb.ID); err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 || done != commands {
		t.Fatalf("%d of %d commands got their outcome; failures: %s", done, commands, strings.Join(failures[:min(len(failures), 5)], "; "))
	}
	kids := children(s.cmd.Process.Pid)
	s.stop(t)
	if left := s.leftovers(kids); len(left) > 0 {
		t.Errorf("left behind: %s", strings.Join(left, "; "))
	}
}

// pss is the proportional set size of pid and its children, in bytes.
func pss(pid int) int64 {
	var total int64
	for _, p := range append([]int{pid}, children(pid)...) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				total += kb << 10
			}
		}
	}
	return total
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// testSchema returns the URL of a schema of its own in the PostgreSQL of
// CORDON_TEST_POSTGRES, dropped when the test ends; without one, the test
// is skipped.
func testSchema(t *testing.T) string {
	t.Helper()
	url := os.Getenv("CORDON_TEST_POSTGRES")
	if url == "" {
		t.Skip("CORDON_TEST_POSTGRES is not set (.ci/run starts a PostgreSQL and sets it)")
	}
	ctx := context.Background()
	schema := fmt.Sprintf("cordon_serve_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(ctx)
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}

// TestServeSharedDatabase runs two cordon serve nodes on one PostgreSQL:
// both see the same pending approvals and decisions, the same audit
// records, and each other's sandboxes.
func TestServeSharedDatabase(t *testing.T) {
	ctx := context.Background()
	db := testSchema(t)
	tokens := map[string]string{}
	for _, name := range []string{"builder", "ops"} {
		tokens[name], _ = server.NewToken()
	}
	agents := "  builder:\n    profile: default\n"
	a := startServeWith(t, agents, nil, fmt.Sprintf("database: %q\nnode: node-a\n", db), tokens)
	b := startServeWith(t, agents, nil, fmt.Sprintf("database: %q\nnode: node-b\n", db), tokens)

	// A held call, as a gateway on any host sharing the database adds it.
	pg, err := statedb.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	store, err := approvals.OpenJournal(pg.Approvals(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := store.Add(approvals.Request{Tool: "pay", Args: json.RawMessage(`{"amount":42}`), Class: "financial", Agent: "builder", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []*served{a, b} {
		pending, err := node.client("ops").Approvals(ctx, false)
		if err != nil || len(pending) != 1 || pending[0].ID != id {
			t.Fatalf("pending approvals on %s: %+v %v", node.url, pending, err)
		}
	}
	if _, err := b.client("ops").Decide(ctx, id, true, api.Decision{Reason: "invoice 42"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client("ops").Decide(ctx, id, false, api.Decision{Reason: "no"}); !client.IsStatus(err, 409) {
		t.Fatalf("deciding again on the other node: %v", err)
	}
	all, err := a.client("ops").Approvals(ctx, true)
	if err != nil || len(all) != 1 || all[0].State != approvals.Approved || all[0].By != "ops" {
		t.Fatalf("the decision seen on node a: %+v %v", all, err)
	}

	// A command on node a is in the audit node b reads; its sandbox is in
	// node b's list, and a command for it sent to node b is sent back.
	sb, err := a.client("builder").CreateAndRun(ctx, api.ExecRequest{Args: []string{"echo", "from node a"}})
	if err != nil || sb.Result == nil || string(sb.Result.Stdout) != "from node a\n" {
		t.Fatalf("create and run on node a: %+v %v", sb, err)
	}
	// Each node sends the database its events and sessions off the path of
	// the requests, within a fraction of a second.
	var recs []json.RawMessage
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if recs, err = b.client("ops").Audit(ctx, neturl.Values{"sandbox": {sb.ID}}); err != nil {
			t.Fatal(err)
		}
		if len(recs) >= 5 || time.Now().After(deadline) {
			break
		}
	}
	var types []string
	for _, r := range recs {
		var rec struct {
			Node string
			Type string
		}
		json.Unmarshal(r, &rec)
		if rec.Node != "node-a" {
			t.Errorf("record from %q, want node-a", rec.Node)
		}
		types = append(types, rec.Type)
	}
	if got := strings.Join(types, " "); !strings.Contains(got, "start exec outcome result result") {
		t.Fatalf("node b's audit of %s: %s", sb.ID, got)
	}
	decisions, err := a.client("ops").Audit(ctx, neturl.Values{"type": {"approval_decision"}})
	if err != nil || len(decisions) != 1 || !strings.Contains(string(decisions[0]), "invoice 42") {
		t.Fatalf("node a's audit of the decision taken on node b: %s %v", decisions, err)
	}
	var list []api.Sandbox
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err = b.client("builder").List(ctx)
		if err != nil || len(list) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(list) != 1 || list[0].ID != sb.ID || list[0].Node != "node-a" {
		t.Fatalf("node b's list: %+v %v", list, err)
	}
	if _, err := b.client("builder").Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); !client.IsStatus(err, 421) {
		t.Fatalf("a command sent to the wrong node: %v", err)
	}
}

// TestServeWebUI drives the page in headless Chromium: the admin signs in,
// sees a sandbox and its session, reviews what its command did beside
// what it printed (markup in the output stays text), and approves a
// pending request.
func TestServeWebUI(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil || mcpClient == "" {
		t.Skip("no Chromium (Debian package chromium) or no npm")
	}
	s := startServe(t, "  builder:\n    profile: default\n", nil)
	ctx := context.Background()
	sb, err := s.client("builder").CreateAndRun(ctx, api.ExecRequest{Args: []string{"sh", "-c", `echo 'total: 42'; echo '<img src=x onerror=alert(1)>'`}})
	if err != nil || sb.Result == nil {
		t.Fatalf("%+v %v", sb, err)
	}
	// A held call, as the server's own gateway would add it: in the
	// server's database (cordon approvals --store reads it too).
	db, err := statedb.Open(ctx, filepath.Join(s.dir, "state", "serve", "db", "cordon.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := approvals.OpenJournal(db.Approvals(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := store.Add(approvals.Request{Tool: "pay", Args: json.RawMessage(`{"amount":42}`), Class: "financial", Agent: "builder", Reason: "financial calls wait for a person", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// cordon approvals reads the same database.
	list := exec.Command(filepath.Join(binDir, "cordon"), "approvals", "list", "--store", filepath.Join(s.dir, "state", "serve", "db", "cordon.db"))
	if out, err := list.CombinedOutput(); err != nil || !strings.Contains(string(out), id) {
		t.Fatalf("cordon approvals list --store DB: %v\n%s", err, out)
	}
	home := t.TempDir()
	cmd := exec.Command("node", filepath.Join(filepath.Dir(mcpClient), "serveui.mjs"), s.url+"/", s.tokens["ops"], sb.ID, id)
	cmd.Env = append(os.Environ(), "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("serveui.mjs: %v\n%s", err, out)
	}
	for _, want := range []string{
		"sandbox: " + sb.ID + " builder ",
		"did: command sh -c echo 'total: 42'; echo '<img src=x onerror=alert(1)>'",
		"saw: ok: the command exited with status 0 stdout (39 bytes) total: 42 <img src=x onerror=alert(1)> stderr (0 bytes)",
		"markup from the sandbox became elements: 0",
		"approval: pay (financial, cannot be undone) for builder",
		"page: approved " + id + " (pay) by ops",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the page lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "page error") || strings.Contains(string(out), "console:") {
		t.Errorf("the page reported errors:\n%s", out)
	}
	it, err := store.Get(id)
	if err != nil || it.State != approvals.Approved || it.By != "ops" || it.Why != "checked the invoice" {
		t.Fatalf("the decision in the store: %+v %v", it, err)
	}
	// Without a token, the API behind the page gives nothing.
	resp, err := http.Get(s.url + "/v1/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("the API without a token: %d", resp.StatusCode)
	}
}

// TestServeDriftAtCheckpoint lowers a claimed sandbox's memory limit from
// the host: the checkpoint after the next command finds it, and the
// sandbox is stopped with drift naming the change.
func TestServeDriftAtCheckpoint(t *testing.T) {
	s := startServe(t, "  watched:\n    profile: watched.yaml\n", map[string]string{
		"watched.yaml": testProfile("watched", "  memory: 256MiB\n") + "drift:\n  every: 1h\ntrajectory:\n  every_steps: 1\n",
	})
	ctx := context.Background()
	c := s.client("watched")
	sb, err := c.CreateAndRun(ctx, api.ExecRequest{Args: []string{"true"}})
	if err != nil || sb.Result == nil {
		t.Fatalf("%+v %v", sb, err)
	}
	var limit string
	pattern := fmt.Sprintf("cordon-%d-", s.cmd.Process.Pid)
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), pattern) {
			for _, f := range []string{"memory.limit_in_bytes", "memory.max"} {
				if _, err := os.Stat(filepath.Join(p, f)); err == nil {
					limit = filepath.Join(p, f)
				}
			}
		}
		return nil
	})
	if limit == "" {
		t.Skip("no memory cgroup of the sandbox to change here")
	}
	if err := os.WriteFile(limit, []byte("67108864"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the sandbox to be stopped for drift", func() bool { got, _ := c.Get(ctx, sb.ID); return got.Ended == "drift" })
	recs, err := s.client("ops").Audit(ctx, neturl.Values{"sandbox": {sb.ID}, "type": {"drift"}})
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0]), "67108864") {
		t.Fatalf("the drift in the audit log: %s %v", recs, err)
	}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// schemeBearer sends a token with the scheme spelled as given.
type schemeBearer struct{ scheme, token string }

func (b schemeBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.scheme+" "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeMCP reaches an agent's tool gateway through cordon serve, with
// the agent's token: its profile decides, its tools run in sandboxes, and
// the calls are in the server's audit log.
func TestServeMCP(t *testing.T) {
	s := startServeWith(t, "  toolsy:\n    profile: toolsy.yaml\n", map[string]string{
		"toolsy.yaml": "version: 1\nagent: toolsy\nworkspace:\n  path: ws\ntools:\n  read_file:\n    class: read\n    constraints:\n      - 'args.path.within(\".\")'\n",
	}, "rate_limit:\n  token:\n    rate: 1000\n    burst: 1000\n", nil) // sessions opened one after another
	if err := os.MkdirAll(filepath.Join(s.dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.dir, "ws", "note.txt"), []byte("from the workspace\n"), 0o644)
	ctx := context.Background()
	connect := func(token string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url + "/v1/mcp",
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	}
	if _, err := connect(""); err == nil {
		t.Fatal("connected without a token")
	}
	if _, err := connect(s.tokens["ops"]); err == nil {
		t.Fatal("connected with an admin token")
	}
	cs, err := connect(s.tokens["toolsy"])
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "read_file" {
		t.Fatalf("tools: %+v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "note.txt"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "from the workspace") {
		t.Fatalf("read_file: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "../serve.yaml"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "cordon refused this call") {
		t.Fatalf("a call the profile refuses: %+v %v", res, err)
	}
	recs, err := s.client("ops").Audit(ctx, neturl.Values{"agent": {"toolsy"}, "type": {"tool_decision"}})
	if err != nil || len(recs) != 2 {
		t.Fatalf("the calls in the audit log: %s %v", recs, err)
	}
	// An agent has at most 64 sessions open at once; an ended one frees
	// its place.
	var more []*mcp.ClientSession
	defer func() {
		for _, m := range more {
			m.Close()
		}
	}()
	for range 63 {
		m, err := connect(s.tokens["toolsy"])
		if err != nil {
			t.Fatalf("session %d: %v", len(more)+2, err)
		}
		more = append(more, m)
	}
	if _, err := connect(s.tokens["toolsy"]); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("a 65th session: %v", err)
	}
	// However the token's scheme is spelled.
	for _, scheme := range []string{"bearer", "BEARER"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		_, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url + "/v1/mcp",
			HTTPClient: &http.Client{Transport: schemeBearer{scheme, s.tokens["toolsy"]}}, MaxRetries: -1}, nil)
		if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Fatalf("a 65th session as %q: %v", scheme, err)
		}
	}
	more[0].Close()
	m, err := connect(s.tokens["toolsy"])
	if err != nil {
		t.Fatalf("a session after one ended: %v", err)
	}
	m.Close()
	// Open sessions' event streams do not hold the server's stop for its
	// grace: nothing runs.
	s.stop(t)
	if strings.Contains(s.log.String(), "still running") {
		t.Errorf("stopping with MCP sessions open:\n%s", s.log)
	}
}

// TestServeProbes: the server runs the escape probes on its agents'
// profiles at start, records the report where cordon lint finds it, and
// shows the result in its metrics.
func TestServeProbes(t *testing.T) {
	s := startServeWith(t, "  builder:\n    profile: default\n", nil, "probe_every: 6h\n", nil)
	req, _ := http.NewRequest("GET", s.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.tokens["ops"])
	var body []byte
	waitUntil(t, "the probes' results in the metrics", func() bool {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return strings.Contains(string(body), `cordon_probe_results{agent="builder",status="contained"}`)
	})
	reports, _ := filepath.Glob(filepath.Join(s.dir, "state", "probes", "*.json"))
	if strings.Contains(string(body), `status="escaped"`) {
		var which []string
		for _, r := range reports {
			var rep struct {
				Results []struct{ ID, Status, Evidence string }
			}
			b, _ := os.ReadFile(r)
			json.Unmarshal(b, &rep)
			for _, res := range rep.Results {
				if res.Status != "contained" {
					which = append(which, res.ID+": "+res.Status+": "+res.Evidence)
				}
			}
		}
		t.Errorf("a probe escaped:\n%s\nreports:\n%s", body, strings.Join(which, "\n"))
	}
	if len(reports) == 0 {
		t.Errorf("no report recorded in %s", filepath.Join(s.dir, "state", "probes"))
	}
}

// lockedBuffer is a server's output, written by the process's copiers
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
