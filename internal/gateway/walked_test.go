package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// A tool server that walks the path it is sent again, as the reference
// filesystem server does: its read and write open the path by name,
// following links. swap, when set, runs between the call's arrival and
// the open: a name on the path is changed there, as another writer of
// the workspace racing the server would.
type walkingServer struct {
	mu     sync.Mutex
	swap   func()
	after  func()
	read   []string // what each read returned
	writes int
	// also is another file a write writes too, as a server led to it.
	also string
}

const walkedProfile = `version: 1
agent: tester
tools:
  up__read:
    class: read
    paths: [file]
    labels:
      - arg: file
        glob: '**/.env*'
        labels: [secret]
    pin: %s
  up__write:
    class: write
    paths: [file]
    constraints: ['args.file.within("notes/")']
    pin: %s
  fetch:
    class: external
approval:
  tools:
    up__write:
      when: 'args.content == "held"'
  via: elicitation
  timeout: 1m
servers:
  up:
    command: [unused]
    profile: unused.yaml
`

type walkedFixture struct {
	ws  string
	srv *walkingServer
	g   *gateway.Gateway
	mu  sync.Mutex
	evs []audit.Event
}

// settle waits until what was just written under dir is older than the
// margin a call's look at changed files takes before its start (the
// clock of change times may lag by one of its steps): the fixture's own
// files are then no change of a call.
func settle(t *testing.T, dir string) {
	t.Helper()
	var newest time.Time
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				if c := time.Unix(st.Ctim.Unix()); c.After(newest) {
					newest = c
				}
			}
		}
		return nil
	})
	time.Sleep(time.Until(newest.Add(tools.SettleMargin + time.Millisecond)))
}

func newWalkedFixture(t *testing.T) *walkedFixture {
	t.Helper()
	ws := t.TempDir()
	for name, content := range map[string]string{"notes/x": "plain", "notes/report.md": "old report", ".env": "API_KEY=AKIA-not-a-real-key", "README.md": "readme"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := &walkingServer{}
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ File string }
			json.Unmarshal(req.Params.Arguments, &a)
			w.mu.Lock()
			if w.swap != nil {
				w.swap()
			}
			b, err := os.ReadFile(a.File)
			w.read = append(w.read, string(b))
			if w.after != nil {
				w.after()
			}
			w.mu.Unlock()
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "write", InputSchema: json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"},"content":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ File, Content string }
			json.Unmarshal(req.Params.Arguments, &a)
			if a.Content == "slow" {
				// Two at once: each sees the other's file change.
				time.Sleep(100 * time.Millisecond)
				if err := os.WriteFile(a.File, []byte(a.Content), 0o644); err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
				}
				time.Sleep(100 * time.Millisecond)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + a.File}}}, nil
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.writes++
			if w.also != "" {
				os.WriteFile(w.also, []byte(a.Content), 0o644)
			}
			if w.swap != nil {
				w.swap()
			}
			if err := os.WriteFile(a.File, []byte(a.Content), 0o644); err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			if w.after != nil {
				w.after()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + a.File}}}, nil
		})
	connect := func() mcp.Transport {
		a, b := mcp.NewInMemoryTransports()
		if _, err := s.Connect(context.Background(), a, nil); err != nil {
			t.Fatal(err)
		}
		return b
	}
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), connect(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := direct.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	direct.Close()
	hashes := map[string]string{}
	for _, tl := range listed.Tools {
		served := *tl
		served.Name = "up__" + tl.Name
		hashes[tl.Name] = gateway.Hash(&served)
	}
	p, err := profile.Parse("test.yaml", []byte(fmt.Sprintf(walkedProfile, hashes["read"], hashes["write"])))
	if err != nil {
		t.Fatal(err)
	}
	store, err := approvals.Open(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	f := &walkedFixture{ws: ws, srv: w}
	f.g, err = gateway.New(context.Background(), gateway.Config{
		Profile: p,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			return []byte(`{"ok":true}`), false, nil
		},
		Upstreams: map[string]mcp.Transport{"up": connect()},
		// Resolved as the resolve mode does, with the workspace's own
		// directories stamped (those above it are other tests').
		Resolve: func(ctx context.Context, server string, paths []string) (string, []tools.Resolved, error) {
			abs := make([]string, len(paths))
			for i, p := range paths {
				if !filepath.IsAbs(p) {
					p = filepath.Join(ws, p)
				}
				abs[i] = p
			}
			return ws, tools.ResolvePaths(abs, ws), nil
		},
		Changed: func(ctx context.Context, server string, dirs []string, since time.Time, max int) ([]toolpolicy.File, bool, error) {
			var roots []string
			for _, d := range dirs {
				if !filepath.IsAbs(d) {
					d = filepath.Join(ws, d)
				}
				roots = append(roots, d)
			}
			found, complete := tools.ChangedSince(roots, since, max)
			var out []toolpolicy.File
			for _, f := range found {
				out = append(out, toolpolicy.File{Path: f.Path, Exists: true, Dev: f.Dev, Ino: f.Ino})
			}
			return out, complete, nil
		},
		Approvals: store,
		Record: func(evs ...audit.Event) error {
			f.mu.Lock()
			f.evs = append(f.evs, evs...)
			f.mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.g.Close)
	settle(t, ws)
	return f
}

// swapTo replaces name (in the workspace) with a symlink to target, and
// returns what puts the file back.
func (f *walkedFixture) swapTo(t *testing.T, name, target string) (swap, back func()) {
	p := filepath.Join(f.ws, name)
	saved := p + ".saved"
	link := p + ".link"
	return func() {
			if err := os.Symlink(target, link); err != nil {
				t.Error(err)
			}
			if err := os.Rename(p, saved); err != nil {
				t.Error(err)
			}
			if err := os.Rename(link, p); err != nil {
				t.Error(err)
			}
		}, func() {
			if err := os.Rename(saved, p); err != nil {
				t.Error(err)
			}
		}
}

func (f *walkedFixture) changedEvents() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.evs {
		if e.Type == "tool_path_changed" {
			n++
		}
	}
	return n
}

// A name swapped to a link to .env while the server reads, and swapped
// back before it answers: the server read .env, which no decision saw (the
// decided file was notes/x, unlabelled). The directory's stamp shows the
// swap: what the server returned is withheld, and the event recorded.
func TestSwapWhileTheServerReadsIsWithheld(t *testing.T) {
	f := newWalkedFixture(t)
	cs := (&fixture{g: f.g}).connect(t)
	if text, isErr := call(t, cs, "up__read", `{"file":"notes/x"}`); isErr || text != "plain" {
		t.Fatalf("an honest read: %v %q", isErr, text)
	}
	swap, back := f.swapTo(t, "notes/x", "../.env")
	f.srv.swap, f.srv.after = swap, back
	text, isErr := call(t, cs, "up__read", `{"file":"notes/x"}`)
	// The server was led to the secret: this is the attack, and what an
	// unchecked gateway would show the agent.
	if got := f.srv.read[len(f.srv.read)-1]; !strings.Contains(got, "API_KEY") {
		t.Fatalf("the swap did not lead the server to .env (it read %q): the test proves nothing", got)
	}
	if !isErr || strings.Contains(text, "API_KEY") || !strings.Contains(text, "rule files") || !strings.Contains(text, "what it returned is withheld") {
		t.Errorf("the read through a swapped name: %v %q", isErr, text)
	}
	if f.changedEvents() != 1 {
		t.Errorf("%d tool_path_changed events, want 1", f.changedEvents())
	}
	// A name left swapped: another file now.
	f.srv.swap, f.srv.after = swap, nil
	text, isErr = call(t, cs, "up__read", `{"file":"notes/x"}`)
	if !isErr || strings.Contains(text, "API_KEY") || !strings.Contains(text, "names "+filepath.Join(f.ws, ".env")+" now") {
		t.Errorf("the read through a name left swapped: %v %q", isErr, text)
	}
}

// A held write approved for notes/report.md is not made once the name
// leads elsewhere: the approver saw the decided file, and the call is
// resolved again before it runs.
func TestHeldWriteSwappedIsNotMade(t *testing.T) {
	f := newWalkedFixture(t)
	swap, _ := f.swapTo(t, "notes/report.md", "../README.md")
	testHeldWrite(t, f, swap, "names "+filepath.Join(f.ws, "README.md")+" now")
	// The same name made another name of README.md (a hard link): the
	// path is the same, the file is not.
	f = newWalkedFixture(t)
	link := func() {
		tmp := filepath.Join(f.ws, "notes/tmp")
		if err := os.Link(filepath.Join(f.ws, "README.md"), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(f.ws, "notes/report.md")); err != nil {
			t.Fatal(err)
		}
	}
	testHeldWrite(t, f, link, "is another file now")
}

func testHeldWrite(t *testing.T, f *walkedFixture, swap func(), want string) {
	t.Helper()
	var asked string
	a, b := mcp.NewInMemoryTransports()
	if _, err := f.g.Server().Connect(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = req.Params.Message
			swap() // while the approver looks
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	})
	cs, err := client.Connect(context.Background(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text, isErr := call(t, cs, "up__write", `{"file":"notes/report.md","content":"held"}`)
	if !isErr || !strings.Contains(text, "rule files") || !strings.Contains(text, want) || !strings.Contains(text, "the call was not made") {
		t.Errorf("the approved write after the swap: %v %q, want %q", isErr, text, want)
	}
	if f.srv.writes != 0 {
		t.Errorf("the server wrote %d times", f.srv.writes)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "README.md")); string(b) != "readme" {
		t.Errorf("README.md is %q", b)
	}
	if want := filepath.Join(f.ws, "notes/report.md") + ", the file of device"; !strings.Contains(asked, want) {
		t.Errorf("the approver was not shown the decided file (%q):\n%s", want, asked)
	}
}

// A write through a name swapped within what the policy allows, left so:
// the file written is another than the one decided; what the server
// answered is withheld, and the session's labels go to that file too.
func TestSwapWhileTheServerWritesIsRecorded(t *testing.T) {
	f := newWalkedFixture(t)
	os.WriteFile(filepath.Join(f.ws, "notes/y"), []byte("y"), 0o644)
	settle(t, f.ws)
	cs := (&fixture{g: f.g}).connect(t)
	if text, isErr := call(t, cs, "up__write", `{"file":"notes/x","content":"new"}`); isErr {
		t.Fatalf("an honest write: %q", text)
	}
	swap, _ := f.swapTo(t, "notes/x", "y")
	f.srv.swap = swap
	text, isErr := call(t, cs, "up__write", `{"file":"notes/x","content":"moved"}`)
	if !isErr || !strings.Contains(text, "rule files") || !strings.Contains(text, "names "+filepath.Join(f.ws, "notes/y")+" now") {
		t.Errorf("the write through a swapped name: %v %q", isErr, text)
	}
	if f.changedEvents() != 1 {
		t.Errorf("%d tool_path_changed events, want 1", f.changedEvents())
	}
}

// A write the server was led to make beside the decided file (a name
// swapped for a link to a sibling and back) is found by the change time
// of the file it wrote: the result is withheld and recorded. Two writes of
// the agent at once do not take each other's files for that.
func TestOtherFileWrittenIsWithheld(t *testing.T) {
	f := newWalkedFixture(t)
	os.WriteFile(filepath.Join(f.ws, "notes/victim"), []byte("victim"), 0o644)
	time.Sleep(50 * time.Millisecond)
	cs := (&fixture{g: f.g}).connect(t)
	f.srv.also = filepath.Join(f.ws, "notes/victim")
	text, isErr := call(t, cs, "up__write", `{"file":"notes/x","content":"led"}`)
	if b, _ := os.ReadFile(filepath.Join(f.ws, "notes/victim")); string(b) != "led" {
		t.Fatalf("the server did not write the sibling (%q): the test proves nothing", b)
	}
	if !isErr || !strings.Contains(text, "other files changed while it ran") || !strings.Contains(text, "notes/victim") {
		t.Errorf("a write that changed a sibling: %v %q", isErr, text)
	}
	if f.changedEvents() != 1 {
		t.Errorf("%d tool_path_changed events, want 1", f.changedEvents())
	}
	f.srv.also = ""
	time.Sleep(50 * time.Millisecond)
	var wg sync.WaitGroup
	for _, name := range []string{"notes/a", "notes/b"} {
		wg.Go(func() {
			if text, isErr := call(t, cs, "up__write", `{"file":"`+name+`","content":"slow"}`); isErr {
				t.Errorf("%s, beside another write: %q", name, text)
			}
		})
	}
	wg.Wait()
}
