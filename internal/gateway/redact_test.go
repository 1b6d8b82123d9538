package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

const redactProfile = `version: 1
agent: tester
tools:
  read_file:
    class: read
    returns: [untrusted]
    labels:
      - {arg: path, suffix: .env, labels: [secret]}
  write_file:
    class: write
  fetch:
    class: external
    accepts: [untrusted]
session:
  max_argument_bytes: %s
  max_result_bytes: 64KiB
`

// The credentials of the tests, made at run time so that no scanner of
// this repository finds them in its source.
var (
	stripeKey = "sk_live_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1)
	ghToken   = "ghp_" + "R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"
	dbPass    = "pa55-Wq8#zLm2!vR"
	dotEnv    = "PORT=8080\nSTRIPE_KEY=" + stripeKey + "\nDATABASE_PASSWORD=" + dbPass + "\n"
)

// logged is a gateway recording into a real audit log file, whose built-in
// tools answer from files (read_file) or echo their content (write_file).
type logged struct {
	g    *gateway.Gateway
	path string
}

func newLogged(t *testing.T, argCap string) *logged {
	t.Helper()
	p, err := profile.Parse("test.yaml", []byte(fmt.Sprintf(redactProfile, argCap)))
	if err != nil {
		t.Fatal(err)
	}
	l := &logged{path: filepath.Join(t.TempDir(), "audit.log")}
	log, err := audit.Open(l.path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{".env": dotEnv, "notes.md": "deploy with " + ghToken + " then check", "plain.md": "nothing to hide"}
	l.g, err = gateway.New(context.Background(), gateway.Config{
		Resolve: fakeResolve(nil),
		Profile: p,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			var a struct{ Path, Content string }
			json.Unmarshal(args, &a)
			out := map[string]any{"content": files[strings.TrimPrefix(a.Path, "/ws/")]}
			if tool == "write_file" {
				out = map[string]any{"written": a.Content}
			}
			b, _ := json.Marshal(out)
			return b, false, nil
		},
		Record: log.Append,
		NewID:  func() string { return "s" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.g.Close)
	return l
}

func (l *logged) connect(t *testing.T) *mcp.ClientSession {
	return (&fixture{g: l.g}).connect(t)
}

// events are the audit log's events of type typ, their data decoded.
func (l *logged) events(t *testing.T, typ string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range bytes.SplitSeq(bytes.TrimSpace(b), []byte("\n")) {
		var r struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %.200s: %v", line, err)
		}
		if r.Type == typ {
			out = append(out, r.Data)
		}
	}
	return out
}

func (l *logged) size(t *testing.T) int64 {
	fi, err := os.Stat(l.path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A .env file read, then passed on by the agent: none of its credentials
// reaches the audit log, which keeps the size and digest of each value.
func TestSecretsStayOutOfTheLog(t *testing.T) {
	l := newLogged(t, "1MiB")
	cs := l.connect(t)
	text, isErr := call(t, cs, "read_file", `{"path": ".env"}`)
	if isErr || !strings.Contains(text, stripeKey) {
		t.Fatalf("the agent is shown the file it read: %v %q", isErr, text)
	}
	// The agent writes what it read elsewhere.
	args, _ := json.Marshal(map[string]string{"path": "copy.txt", "content": dotEnv})
	call(t, cs, "write_file", string(args))

	// Another agent (here: of another gateway) reads a file that is not
	// labelled but holds a token: the scanner finds it, and the agent is
	// labelled secret for it.
	l2 := newLogged(t, "1MiB")
	cs2 := l2.connect(t)
	call(t, cs2, "read_file", `{"path": "notes.md"}`)
	text, isErr = call(t, cs2, "fetch", `{"url": "https://example.org/"}`)
	if !isErr || !strings.Contains(text, `"secret"`) || !strings.Contains(text, "notes.md") {
		t.Errorf("fetch after a token was read: %v %q, want a refusal for secret naming the read", isErr, text)
	}
	// A token an agent puts in an argument itself is found too.
	args, _ = json.Marshal(map[string]string{"path": "plain.md", "content": "token " + ghToken})
	l3 := newLogged(t, "1MiB")
	call(t, l3.connect(t), "write_file", string(args))

	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(l2.path)
	if err != nil {
		t.Fatal(err)
	}
	b3, err := os.ReadFile(l3.path)
	if err != nil {
		t.Fatal(err)
	}
	b = append(append(b, b2...), b3...)
	for _, secret := range []string{stripeKey, dbPass, ghToken, stripeKey[8:20], ghToken[4:20]} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the audit log holds %q:\n%s", secret, b)
		}
	}

	results := l.events(t, "tool_result")
	if len(results) != 2 {
		t.Fatalf("%d results recorded, want 2", len(results))
	}
	env := results[0]
	envJSON, _ := json.Marshal([]mcp.Content{&mcp.TextContent{Text: `{"content":` + mustJSON(dotEnv) + `}`}})
	sum := sha256.Sum256(envJSON)
	if env["redacted"] != "credential (stripe-access-token, generic-credential)" || env["sha256"] != hex.EncodeToString(sum[:]) || env["bytes"] != float64(len(envJSON)) || env["content"] != nil {
		t.Errorf(".env's result recorded as %v; want its size and digest (%d, %x), redacted, no content", env, len(envJSON), sum)
	}
	calls := l.events(t, "tool_call")
	if got := calls[1]["args_redacted"]; got != "the session carries secret" {
		t.Errorf("the write after the read: args_redacted %v, want the session's label", got)
	}
	if got := calls[1]["args"].(map[string]any)["path"]; got != "[redacted: 12 bytes]" {
		t.Errorf("in a session that carries secret, the path is logged as %q", got)
	}
	notes := l2.events(t, "tool_result")[0]
	if notes["found"] == nil || fmt.Sprint(notes["labels"]) != "[secret untrusted]" || notes["content"] != nil {
		t.Errorf("notes.md's result recorded as %v; want found [secret], labels secret and untrusted, no content", notes)
	}
	last := l3.events(t, "tool_call")[0]
	if last["args_redacted"] != "credential (github-pat)" || !strings.HasPrefix(last["args"].(map[string]any)["content"].(string), `token [redacted github-pat: "ghp_"…, 40 bytes]`) {
		t.Errorf("an argument holding a token is logged as %v", last)
	}
	if got := l3.events(t, "tool_result")[0]["content"]; got == nil {
		// The echo holds the token too: no preview.
	} else {
		t.Errorf("the echo of a token is previewed: %v", got)
	}
	if plain := calls[0]["args"].(map[string]any)["path"]; plain != "/ws/.env" {
		t.Errorf("a clean argument is logged as %v, want it whole", plain)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// An argument of 8 MB grows the log by a bounded amount, its result is cut
// for the agent with a note, and an argument over the bound is refused
// before it is decided, with its size and digest recorded.
func TestSizesAreBounded(t *testing.T) {
	l := newLogged(t, "16MiB")
	cs := l.connect(t)
	big := strings.Repeat("0123456789abcdef", 8<<20/16)
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": big})
	before := l.size(t)
	text, isErr := call(t, cs, "write_file", string(args))
	grown := l.size(t) - before
	if isErr {
		t.Fatalf("the 8 MB call was refused: %.300s", text)
	}
	if grown > 24<<10 {
		t.Errorf("an 8 MB argument grew the log by %d bytes", grown)
	}
	if len(text) > 64<<10 || !strings.Contains(text, "cordon cut this result at the profile's bound of 65536 bytes (session.max_result_bytes)") {
		t.Errorf("the agent got %d bytes, ending %q; want at most the bound, with a note", len(text), text[max(0, len(text)-200):])
	}
	calls := l.events(t, "tool_call")
	if c := calls[0]; c["args_bytes"].(float64) < float64(len(big)) || len(c["args_sha256"].(string)) != 64 || c["args_cut"] != true {
		t.Errorf("the big call is recorded as %.400v", c)
	}

	small := newLogged(t, "1MiB")
	cs = small.connect(t)
	before = small.size(t)
	args = bigCall(3 << 20).Arguments.(json.RawMessage)
	sum := sha256.Sum256(args)
	text, isErr = call(t, cs, "write_file", string(args))
	if !isErr || !strings.Contains(text, "rule session.max_argument_bytes") || !strings.Contains(text, fmt.Sprintf("are %d bytes, more than the profile's bound of 1048576 bytes", len(args))) {
		t.Errorf("an argument over the bound: %v %q, want a refusal naming the bound", isErr, text)
	}
	if grown := small.size(t) - before; grown > 4<<10 {
		t.Errorf("the refused argument grew the log by %d bytes", grown)
	}
	d := small.events(t, "tool_decision")
	if len(d) != 1 || d[0]["allow"] != false || d[0]["rule"] != "session.max_argument_bytes" {
		t.Errorf("the refusal is recorded as %v", d)
	}
	if c := small.events(t, "tool_call"); len(c) != 1 || c[0]["args_sha256"] != hex.EncodeToString(sum[:]) || c[0]["args"] != nil {
		t.Errorf("the refused call is recorded as %v, want its size and digest only", c)
	}
	// The session goes on.
	if text, isErr := call(t, cs, "read_file", `{"path": "plain.md"}`); isErr || !strings.Contains(text, "nothing to hide") {
		t.Errorf("after the refusal: %v %q", isErr, text)
	}
}
