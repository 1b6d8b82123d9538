package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// fakeResolve resolves paths in a view whose workspace is /ws, where
// links maps a path to the path its symlink names; a name starting with
// "new" does not exist yet.
func fakeResolve(links map[string]string) gateway.Resolver {
	return func(ctx context.Context, server string, paths []string) (string, []tools.Resolved, error) {
		var out []tools.Resolved
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				p = filepath.Join("/ws", p)
			}
			p = filepath.Clean(p)
			for i := 0; i < 10 && links[p] != ""; i++ {
				p = links[p]
			}
			h := fnv.New64()
			h.Write([]byte(p))
			out = append(out, tools.Resolved{File: tools.File{Path: p, Exists: !strings.HasPrefix(filepath.Base(p), "new"), Dev: 1, Ino: h.Sum64(), Links: 1}})
		}
		return "/ws", out, nil
	}
}

const builtinProfile = `version: 1
agent: tester
tools:
  run:
    class: write
  read_file:
    class: read
    labels:
      - arg: path
        glob: '**/.env*'
        labels: [secret]
  write_file:
    class: write
    constraints: ['args.path.within("notes/")']
  list_files:
    class: read
  fetch:
    class: external
  up__echo:
    class: read
    pin: %s
  up__leak:
    class: read
    returns: [secret]
    pin: %s
  up__open:
    class: read
    paths: [file]
    labels:
      - arg: file
        glob: '**/.env*'
        labels: [secret]
    pin: %s
servers:
  up:
    command: [unused]
    profile: unused.yaml
`

// builtinFixture is a gateway of builtinProfile whose runner records what
// each built-in tool receives, with the files it is held to.
type builtinFixture struct {
	g    *gateway.Gateway
	mu   sync.Mutex
	runs []string
	// fail makes the runner's tool fail with this output.
	fail string
}

func newBuiltinFixture(t *testing.T, links map[string]string) *builtinFixture {
	t.Helper()
	tools := map[string]*mcp.Tool{
		"echo": {Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"number"}}}`)},
		"leak": {Name: "leak", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		"open": {Name: "open", InputSchema: json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"}}}`)},
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	s.AddTool(tools["echo"], func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	s.AddTool(tools["leak"], func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "error: AWS_SECRET=abc"}}}, nil
	})
	s.AddTool(tools["open"], func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	connect := func() mcp.Transport {
		a, b := mcp.NewInMemoryTransports()
		if _, err := s.Connect(context.Background(), a, nil); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The pins are those of the tools as listed.
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
		served.Name = "up__" + tl.Name // the pin is of the tool as served
		hashes[tl.Name] = gateway.Hash(&served)
	}
	var pins []any
	for _, name := range []string{"echo", "leak", "open"} {
		pins = append(pins, hashes[name])
	}
	p, err := profile.Parse("test.yaml", []byte(fmt.Sprintf(builtinProfile, pins...)))
	if err != nil {
		t.Fatal(err)
	}
	f := &builtinFixture{}
	f.g, err = gateway.New(context.Background(), gateway.Config{
		Profile: p,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			run := tool + " " + string(args)
			for _, arg := range slices.Sorted(func(yield func(string) bool) {
				for k := range gateway.DecidedFiles(ctx) {
					yield(k)
				}
			}) {
				file := gateway.DecidedFiles(ctx)[arg]
				run += fmt.Sprintf(" %s=%s", arg, file.Path)
			}
			f.runs = append(f.runs, run)
			if f.fail != "" {
				return []byte(f.fail), true, nil
			}
			return []byte(`{"ok":true}`), false, nil
		},
		Upstreams: map[string]mcp.Transport{"up": connect()},
		Resolve:   fakeResolve(links),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.g.Close)
	return f
}

func (f *builtinFixture) connect(t *testing.T) *mcp.ClientSession {
	return (&fixture{g: f.g}).connect(t)
}

// Every built-in tool refuses arguments the policy would read otherwise
// than the tool: a field in another case, a key given twice (at any
// depth), a field its schema does not declare (another tool's included).
// None of them runs.
func TestCanonicalArgumentsOfBuiltins(t *testing.T) {
	f := newBuiltinFixture(t, nil)
	cs := f.connect(t)
	for _, tt := range []struct{ tool, args, want string }{
		{"run", `{"argv":["git","status"],"ARGV":["sh","-c","id"]}`, `fields "argv" and "ARGV" differ only in case`},
		{"run", `{"argv":["git","status"],"argv":["sh","-c","id"]}`, `field "argv" given twice`},
		{"run", `{"argv":["git"],"path":"x"}`, `has no argument "path"`},
		{"read_file", `{"path":"README.md","Path":".env"}`, `fields "path" and "Path" differ only in case`},
		{"read_file", `{"path":"README.md","path":".env"}`, `given twice`},
		{"read_file", `{"path":"README.md","content":"x"}`, `has no argument "content"`},
		{"write_file", `{"path":"notes/ok.md","PATH":"pwned.sh","content":"x"}`, `fields "path" and "PATH" differ only in case`},
		{"write_file", `{"path":"notes/ok.md","path":"pwned.sh","content":"x"}`, `given twice`},
		{"list_files", `{"path":".","Path":"/"}`, `fields "path" and "Path" differ only in case`},
		{"list_files", `{"path":".","path":"/"}`, `given twice`},
		{"fetch", `{"url":"https://example.org/","URL":"http://169.254.169.254/"}`, `fields "url" and "URL" differ only in case`},
		{"fetch", `{"url":"https://example.org/","url":"http://169.254.169.254/"}`, `given twice`},
		{"fetch", `{"url":"https://example.org/","x":{"a":1,"a":2}}`, `field "a" given twice`},
	} {
		text, isErr := call(t, cs, tt.tool, tt.args)
		if !isErr || !strings.Contains(text, "rule arguments") || !strings.Contains(text, tt.want) {
			t.Errorf("%s %s: %v %q, want %q", tt.tool, tt.args, isErr, text, tt.want)
		}
	}
	if len(f.runs) != 0 {
		t.Errorf("ran: %v", f.runs)
	}
}

// The tool receives the decided arguments' bytes: a built-in tool's path
// is the resolved one, and it is held to the decided file; an upstream
// tool receives the re-encoded arguments, not the agent's bytes.
func TestToolsReceiveTheDecidedBytes(t *testing.T) {
	f := newBuiltinFixture(t, map[string]string{"/ws/docs/config.txt": "/ws/.env"})
	cs := f.connect(t)
	call(t, cs, "read_file", `{"path": "./notes//a.md", "max_bytes": 10}`)
	call(t, cs, "list_files", `{}`)
	if want := []string{
		`read_file {"max_bytes":10,"path":"/ws/notes/a.md"} path=/ws/notes/a.md`,
		`list_files {"path":"/ws"} path=/ws`,
	}; !slices.Equal(f.runs, want) {
		t.Errorf("runs:\n%s\nwant\n%s", strings.Join(f.runs, "\n"), strings.Join(want, "\n"))
	}
	text, isErr := call(t, cs, "up__echo", `{ "n": 1.50, "text" : "hi\u0041" }`)
	if isErr || text != `{"n":1.5,"text":"hiA"}` {
		t.Errorf("the upstream received %q (%v), not the decided bytes", text, isErr)
	}
	text, isErr = call(t, cs, "up__echo", `{"text":"hi","Text":"x"}`)
	if !isErr || !strings.Contains(text, `fields "text" and "Text" differ only in case`) {
		t.Errorf("a case variant reached the upstream: %q", text)
	}
	// An upstream tool's path argument is sent resolved.
	text, _ = call(t, cs, "up__open", `{"file":"docs/../docs/config.txt"}`)
	if text != `{"file":"/ws/.env"}` {
		t.Errorf("up__open received %q", text)
	}
}

// Labels and constraints see files: a symlink to .env is .env, a path
// outside notes/ through a symlink inside it is refused.
func TestPathsAreFiles(t *testing.T) {
	f := newBuiltinFixture(t, map[string]string{
		"/ws/docs/config.txt": "/ws/.env",
		"/ws/notes/evil-link": "/ws/README.md",
	})
	for _, read := range []string{"docs/config.txt", "./.env", "/ws//.env", ".env.production"} {
		cs := f.connect(t)
		call(t, cs, "read_file", `{"path":"`+read+`"}`)
		text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`)
		if !isErr || !strings.Contains(text, `carries "secret"`) {
			t.Errorf("fetch after reading %s: %v %q", read, isErr, text)
		}
	}
	cs := f.connect(t)
	text, isErr := call(t, cs, "write_file", `{"path":"notes/evil-link","content":"x"}`)
	if !isErr || !strings.Contains(text, `args.path.within("notes/") is false`) {
		t.Errorf("write through a symlink out of notes/: %v %q", isErr, text)
	}
	if text, isErr := call(t, cs, "write_file", `{"path":"notes/new.md","content":"x"}`); isErr {
		t.Errorf("write in notes/: %q", text)
	}
	// An upstream tool's path argument is labelled as the file it names.
	call(t, cs, "up__open", `{"file":"docs/config.txt"}`)
	if text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("fetch after up__open of .env: %v %q", isErr, text)
	}
}

// A result shown to the agent brings its labels in, an error included.
func TestErrorsBringLabels(t *testing.T) {
	f := newBuiltinFixture(t, nil)
	cs := f.connect(t)
	if text, isErr := call(t, cs, "up__leak", `{}`); !isErr || !strings.Contains(text, "AWS_SECRET") {
		t.Fatalf("leak: %v %q", isErr, text)
	}
	if text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret", brought in by call 1 (up__leak)`) {
		t.Errorf("fetch after an error with a secret: %v %q", isErr, text)
	}
	// A built-in tool's failure with partial output.
	// (Each part is another gateway: the sessions of one agent share
	// their labels.)
	f = newBuiltinFixture(t, nil)
	f.fail = `{"error":"short read","content":"K=V"}`
	cs = f.connect(t)
	call(t, cs, "read_file", `{"path":".env"}`)
	if text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("fetch after a failed read of .env: %v %q", isErr, text)
	}
	// A refusal by cordon brings nothing.
	f = newBuiltinFixture(t, nil)
	cs = f.connect(t)
	call(t, cs, "write_file", `{"path":".env","content":"x"}`)
	if text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`); isErr {
		t.Errorf("fetch after a refusal: %q", text)
	}
}

// Without a resolver, a call that names a file is refused.
func TestNoResolverRefusesPaths(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\ntools:\n  read_file:\n    class: read\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), gateway.Config{Profile: p, Run: func(context.Context, string, json.RawMessage) ([]byte, bool, error) {
		t.Error("ran")
		return nil, false, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if text, isErr := call(t, (&fixture{g: g}).connect(t), "read_file", `{"path":"a"}`); !isErr || !strings.Contains(text, "cannot resolve paths") {
		t.Errorf("%v %q", isErr, text)
	}
}

// A file written by a session that carries a secret is secret for every
// later session of the gateway.
func TestWrittenFileLabelsCrossSessions(t *testing.T) {
	f := newBuiltinFixture(t, nil)
	cs := f.connect(t)
	call(t, cs, "read_file", `{"path":".env"}`)
	if text, isErr := call(t, cs, "write_file", `{"path":"notes/new-copy.md","content":"K=V"}`); isErr {
		t.Fatalf("write: %q", text)
	}
	cs = f.connect(t)
	call(t, cs, "read_file", `{"path":"notes/new-copy.md"}`)
	if text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`); !isErr || !strings.Contains(text, `carries "secret"`) {
		t.Errorf("fetch after reading a file a labelled session wrote: %v %q", isErr, text)
	}
}

// A call refused for its arguments is on the record, with what was sent.
func TestArgumentRefusalsAreRecorded(t *testing.T) {
	f := pinned(t)
	call(t, f.connect(t), "read_file", `{"path":"a","Path":"b"}`)
	f.mu.Lock()
	defer f.mu.Unlock()
	var got []string
	for _, e := range f.evs {
		b, _ := json.Marshal(e.Data)
		got = append(got, string(e.Type)+" "+string(b))
	}
	if len(got) != 2 || !strings.Contains(got[0], `tool_call {"sent":"{\"path\":\"a\",\"Path\":\"b\"}"`) || !strings.Contains(got[1], `"allow":false`) || !strings.Contains(got[1], `"rule":"arguments"`) {
		t.Errorf("events:\n%s", strings.Join(got, "\n"))
	}
}
