package gateway_test

// Attacks on the gateway's promises: decided on exactly what runs, labels
// for everything shown, secrets kept out of the log. Each TestAttack_ is
// one way an agent or a server tries to get past them.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/secretscan"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// atkToken is a GitHub token as the scanner knows it.
var atkToken = "ghp_" + "R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"

// atkPassword is an assignment of a password the scanner finds in plain
// text (an ampersand in it, as a generated password has).
const atkPassword = "DB_PASSWORD=Xy7&kP9!qR2#wZ"

// atkTools are the tools of the attack's upstream server: each shows the
// agent a credential in a way of its own.
func atkTools() map[string]struct {
	def *mcp.Tool
	h   mcp.ToolHandler
} {
	obj := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	text := func(s ...string) *mcp.CallToolResult {
		r := &mcp.CallToolResult{}
		for _, p := range s {
			r.Content = append(r.Content, &mcp.TextContent{Text: p})
		}
		return r
	}
	type T = struct {
		def *mcp.Tool
		h   mcp.ToolHandler
	}
	return map[string]T{
		// A credential in base64, as a file's bytes or an API's payload.
		"b64": {&mcp.Tool{Name: "b64", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("the config, base64: " + base64.StdEncoding.EncodeToString([]byte("token="+atkToken))), nil
		}},
		// A .env line whose password holds '&'.
		"env": {&mcp.Tool{Name: "env", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(atkPassword), nil
		}},
		// A credential in the result's _meta.
		"meta": {&mcp.Tool{Name: "meta", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Meta: mcp.Meta{"debug": "auth " + atkToken}, Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		}},
		// A JSON-RPC error whose data holds a credential (the gateway
		// passes on only its message: this held).
		"errdata": {&mcp.Tool{Name: "errdata", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32001, Message: "lookup failed", Data: json.RawMessage(`{"auth":"` + atkToken + `"}`)}
		}},
		// A credential split over two content items.
		"split": {&mcp.Tool{Name: "split", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(atkToken[:20], atkToken[20:]), nil
		}},
		// A server that decodes its arguments with Go's encoding/json into
		// a struct, as many do: it runs the mode it decoded.
		"mode": {&mcp.Tool{Name: "mode", InputSchema: json.RawMessage(`{"type":"object","properties":{"opts":{"type":"object"}}}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Opts struct {
					Kind string `json:"kind"`
				} `json:"opts"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return text("ran kind=" + in.Opts.Kind), nil
		}},
	}
}

const atkProfile = `version: 1
agent: attacker
tools:
  read_file:
    class: read
    labels:
      - arg: path
        glob: '**/.env*'
        labels: [secret]
  write_file:
    class: write
  fetch:
    class: external
  up__b64:
    class: read
    pin: %[1]s
  up__env:
    class: read
    pin: %[2]s
  up__meta:
    class: read
    pin: %[3]s
  up__errdata:
    class: read
    pin: %[4]s
  up__split:
    class: read
    pin: %[5]s
  up__mode:
    class: write
    constraints: ['args.opts.kind == "safe"']
    pin: %[6]s
servers:
  up:
    command: [unused]
    profile: unused.yaml
%[7]s
`

var atkNames = []string{"b64", "env", "meta", "errdata", "split", "mode"}

// atk is a gateway of atkProfile (extra appended) with the attack's
// upstream server, recording its audit log as JSON.
type atk struct {
	g   *gateway.Gateway
	mu  sync.Mutex
	log bytes.Buffer
	evs []audit.Event
}

func (a *atk) logged() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log.String()
}

func newAtk(t *testing.T, extra string, resolve ...gateway.Resolver) *atk {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	defs := atkTools()
	for _, n := range atkNames {
		s.AddTool(defs[n].def, defs[n].h)
	}
	connect := func() mcp.Transport {
		a, b := mcp.NewInMemoryTransports()
		if _, err := s.Connect(context.Background(), a, nil); err != nil {
			t.Fatal(err)
		}
		return b
	}
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "pin", Version: "1"}, nil).Connect(context.Background(), connect(), nil)
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
	var args []any
	for _, n := range atkNames {
		args = append(args, hashes[n])
	}
	args = append(args, extra)
	p, err := profile.Parse("atk.yaml", []byte(fmt.Sprintf(atkProfile, args...)))
	if err != nil {
		t.Fatal(err)
	}
	store, err := approvals.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &atk{}
	n := 0
	a.g, err = gateway.New(context.Background(), gateway.Config{
		Profile: p,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			return []byte(`{"ok":true}`), false, nil
		},
		Upstreams: map[string]mcp.Transport{"up": connect()},
		Record: func(evs ...audit.Event) error {
			a.mu.Lock()
			defer a.mu.Unlock()
			b, _ := json.Marshal(evs)
			a.log.Write(b)
			a.log.WriteByte('\n')
			a.evs = append(a.evs, evs...)
			return nil
		},
		NewID:     func() string { n++; return fmt.Sprint("s", n) },
		Approvals: store,
		PollEvery: 5 * time.Millisecond,
		Resolve:   append(resolve, fakeResolve(nil))[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.g.Close)
	return a
}

func (a *atk) connect(t *testing.T) *mcp.ClientSession {
	return (&fixture{g: a.g}).connect(t)
}

// fetchRefused says whether a fetch is refused as the flow of a secret.
func fetchRefused(t *testing.T, cs *mcp.ClientSession) (bool, string) {
	t.Helper()
	text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`)
	return isErr && strings.Contains(text, `carries "secret"`), text
}

// A credential the agent is shown in base64 (a config blob, a Kubernetes
// secret, a data: URL) is a credential shown: base64 runs in text that
// decode to text are scanned too, the session is labelled, and the log's
// preview is masked.
func TestAttack_Base64CredentialInResult(t *testing.T) {
	if _, ok := secretscan.Found([]byte("token=" + atkToken)); !ok {
		t.Fatal("the scanner does not know the token in clear")
	}
	a := newAtk(t, "")
	cs := a.connect(t)
	text, isErr := call(t, cs, "up__b64", `{}`)
	enc := base64.StdEncoding.EncodeToString([]byte("token=" + atkToken))
	if isErr || !strings.Contains(text, enc) {
		t.Fatalf("up__b64: %v %q", isErr, text)
	}
	if refused, got := fetchRefused(t, cs); !refused {
		t.Errorf("the agent was shown a GitHub token in base64, and may still fetch: %q", got)
	}
	if strings.Contains(a.logged(), enc[8:40]) {
		t.Errorf("the audit log keeps the base64 of a GitHub token")
	}
}

// What the agent is shown is scanned as the text it reads, not as its JSON:
// encoding/json writes '&', '<' and '>' as \u0026, \u003c, \u003e, which
// would cut a password at the escape and pass it as no credential.
func TestAttack_JSONEscapingHidesCredential(t *testing.T) {
	if _, ok := secretscan.Found([]byte(atkPassword)); !ok {
		t.Fatal("the scanner does not find the password in the text")
	}
	a := newAtk(t, "")
	cs := a.connect(t)
	if text, isErr := call(t, cs, "up__env", `{}`); isErr || text != atkPassword {
		t.Fatalf("up__env: %v %q", isErr, text)
	}
	if refused, got := fetchRefused(t, cs); !refused {
		t.Errorf("the agent was shown %q, and may still fetch: %q", atkPassword, got)
	}
	if strings.Contains(a.logged(), `Xy7\\u0026kP9!qR2#wZ`) {
		t.Errorf("the audit log keeps the password (JSON-escaped): %s", a.logged())
	}
}

// The result's _meta reaches the agent's client: it is scanned too.
func TestAttack_ResultMetaNotScanned(t *testing.T) {
	a := newAtk(t, "")
	cs := a.connect(t)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up__meta", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := res.Meta["debug"].(string); !strings.Contains(s, atkToken) {
		t.Fatalf("the _meta did not reach the agent: %v", res.Meta)
	}
	if refused, got := fetchRefused(t, cs); !refused {
		t.Errorf("the agent's client got a GitHub token in _meta, and may still fetch: %q", got)
	}
}

// A token split over two text items (which the agent reads one after the
// other) is found: the items are scanned joined.
func TestAttack_CredentialSplitAcrossContentItems(t *testing.T) {
	a := newAtk(t, "")
	cs := a.connect(t)
	if text, isErr := call(t, cs, "up__split", `{}`); isErr || strings.ReplaceAll(text, "\n", "") != atkToken {
		t.Fatalf("up__split: %v %q", isErr, text)
	}
	if refused, got := fetchRefused(t, cs); !refused {
		t.Errorf("the agent was shown a GitHub token in two parts, and may still fetch: %q", got)
	}
}

// Below the top level too, a key that differs from another only by Unicode
// case folding (the Kelvin sign K folds to k in Go's encoding/json, as ſ
// does to s) is refused: the policy would read args.opts.kind == "safe"
// while a server decoding with encoding/json takes the last, "evil".
func TestAttack_NestedCaseFoldedKey(t *testing.T) {
	a := newAtk(t, "")
	cs := a.connect(t)
	text, isErr := call(t, cs, "up__mode", `{"opts":{"kind":"evil"}}`)
	if !isErr {
		t.Fatalf("the constraint does not hold: %q", text)
	}
	text, isErr = call(t, cs, "up__mode", `{"opts":{"kind":"safe","\u212aind":"evil"}}`)
	if !isErr && strings.Contains(text, "kind=evil") {
		t.Errorf("the policy decided kind=safe and the server ran %q", text)
	}
}

// The decided files of a call are logged as its arguments are: a path
// that holds a credential is masked, and in a session that carries secret
// every path is.
func TestAttack_ResolvedFilesLoggedInClear(t *testing.T) {
	a := newAtk(t, "")
	cs := a.connect(t)
	call(t, cs, "read_file", `{"path":"notes/`+atkToken+`.txt"}`)
	if strings.Contains(a.logged(), atkToken[4:24]) {
		t.Errorf("the audit log keeps a GitHub token from a path: %s", a.logged())
	}
	// A secret session: read .env, then write a file named by a value of it.
	call(t, cs, "read_file", `{"path":".env"}`)
	call(t, cs, "write_file", `{"path":"notes/hunter2-prod-db","content":"x"}`)
	if strings.Contains(a.logged(), "hunter2-prod-db") {
		t.Errorf("in a session that carries secret, the audit log keeps an argument's value in clear (files)")
	}
}

// A call over the argument bound is refused before it is decoded; the name
// the agent sent (no tool's) is still logged as its arguments would be, in
// "tool" and in the reason.
func TestAttack_OversizedCallLogsToolNameInClear(t *testing.T) {
	a := newAtk(t, "session:\n  max_argument_bytes: 1KiB\n")
	cs := a.connect(t)
	big := `{"text":"` + strings.Repeat("a", 2048) + `"}`
	text, isErr := call(t, cs, atkToken, big)
	if !isErr || !strings.Contains(text, "max_argument_bytes") {
		t.Fatalf("oversized call: %v %q", isErr, text)
	}
	if strings.Contains(a.logged(), atkToken[4:24]) {
		t.Errorf("the audit log keeps the tool name the agent sent, a GitHub token, in clear")
	}
}

// A flow's reason quotes the call that brought the label in, with its
// arguments: the approval request's record keeps the reason redacted, as
// the decision's record does.
func TestAttack_ApprovalRequestReasonLogsCredential(t *testing.T) {
	a := newAtk(t, "approval:\n  flows: true\n  timeout: 1s\n")
	cs := a.connect(t)
	// A read of a .env that the agent names by a token it holds.
	call(t, cs, "read_file", `{"path":"`+atkToken+`/.env"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "fetch", Arguments: json.RawMessage(`{"url":"https://example.org/"}`)})
	a.mu.Lock()
	var held bool
	for _, e := range a.evs {
		if e.Type == "approval_request" {
			held = true
		}
	}
	a.mu.Unlock()
	if !held {
		t.Fatalf("the fetch was not held: %s", a.logged())
	}
	for _, line := range strings.Split(a.logged(), "\n") {
		if strings.Contains(line, "approval_request") && strings.Contains(line, atkToken[4:24]) {
			t.Errorf("the approval request's record keeps a GitHub token in clear: %s", line)
		}
	}
}

// Labels are the agent's, and a new session does not launder them, nor
// does waiting out session.wall: the budgets start anew, the labels stay
// (the model still holds what it read).
func TestAttack_SessionWallLaundersTaint(t *testing.T) {
	a := newAtk(t, "session:\n  wall: 300ms\n")
	cs := a.connect(t)
	call(t, cs, "read_file", `{"path":".env"}`)
	if refused, got := fetchRefused(t, cs); !refused {
		t.Fatalf("fetch right after reading .env: %q", got)
	}
	time.Sleep(400 * time.Millisecond)
	text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`)
	if !isErr {
		t.Errorf("after session.wall, the agent that read .env fetches freely: %q", text)
	}
}

// atkFS is a workspace /ws whose files have identities: a path maps to
// its inode; a path not in it does not exist (its parent is inode 1).
type atkFS struct {
	mu    sync.Mutex
	files map[string]uint64
	// later are files that exist from the second time they are resolved
	// on (a write creates them after its call was decided).
	later map[string]uint64
	seen  map[string]bool
}

func (f *atkFS) resolve(ctx context.Context, server string, paths []string) (string, []tools.Resolved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []tools.Resolved
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join("/ws", p)
		}
		p = filepath.Clean(p)
		if ino, ok := f.later[p]; ok {
			if f.seen[p] {
				f.files[p] = ino
				delete(f.later, p)
			}
			if f.seen == nil {
				f.seen = map[string]bool{}
			}
			f.seen[p] = true
		}
		ino, ok := f.files[p]
		if !ok {
			out = append(out, tools.Resolved{File: tools.File{Path: p, Dev: 1, Ino: 1}})
			continue
		}
		out = append(out, tools.Resolved{File: tools.File{Path: p, Exists: true, Dev: 1, Ino: ino, Links: 1}})
	}
	return "/ws", out, nil
}

// A file a labelled session creates is labelled by its identity too, found
// once the write made it: renamed (mv in the run tool, or by any tool), it
// keeps its labels, and another agent that reads it may not send it out.
func TestAttack_NewFileLabelLostOnRename(t *testing.T) {
	fsys := &atkFS{files: map[string]uint64{"/ws/.env": 10}, later: map[string]uint64{"/ws/notes/copy.md": 77}}
	a := newAtk(t, "", fsys.resolve)
	f := &fixture{g: a.g}
	alice := f.connectAs(t, "alice")
	call(t, alice, "read_file", `{"path":".env"}`)
	if text, isErr := call(t, alice, "write_file", `{"path":"notes/copy.md","content":"K=V"}`); isErr {
		t.Fatalf("write: %q", text)
	}
	// The file is created (inode 77), then renamed.
	fsys.mu.Lock()
	delete(fsys.files, "/ws/notes/copy.md")
	fsys.files["/ws/notes/plain.md"] = 77
	fsys.mu.Unlock()
	bob := f.connectAs(t, "bob")
	call(t, bob, "read_file", `{"path":"notes/plain.md"}`)
	if refused, got := fetchRefused(t, bob); !refused {
		t.Errorf("bob read the secret copy alice wrote, renamed, and may fetch: %q", got)
	}
}
