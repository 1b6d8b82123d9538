package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bigCall is a call whose arguments are n bytes and more.
func bigCall(n int) *mcp.CallToolParams {
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": strings.Repeat("A", n)})
	return &mcp.CallToolParams{Name: "write_file", Arguments: json.RawMessage(args)}
}

// checkRefusedAndAlive makes a 40 MB call, which must be refused by a
// JSON-RPC error naming the bound, and then an ordinary one, which must
// run: the session lives on.
func checkRefusedAndAlive(t *testing.T, cs *mcp.ClientSession, l *logged) {
	t.Helper()
	_, err := cs.CallTool(context.Background(), bigCall(40<<20))
	if err == nil || !strings.Contains(err.Error(), "cordon refused this message: it is") || !strings.Contains(err.Error(), "more than the bound of 2097152 bytes") {
		t.Fatalf("a 40 MB call: %v, want a refusal naming the bound", err)
	}
	text, isErr := call(t, cs, "read_file", `{"path": "plain.md"}`)
	if isErr || !strings.Contains(text, "nothing to hide") {
		t.Errorf("after the refusal: %v %q", isErr, text)
	}
	refused := l.events(t, "message_refused")
	if len(refused) != 1 || refused[0]["bytes"].(float64) < 40<<20 || len(refused[0]["sha256"].(string)) != 64 {
		t.Errorf("the refused message is recorded as %v, want its size and digest", refused)
	}
	if l.size(t) > 64<<10 {
		t.Errorf("the log is %d bytes after a 40 MB message", l.size(t))
	}
}

func TestStdioRefusesOversizedMessages(t *testing.T) {
	l := newLogged(t, "1MiB")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss, err := l.g.Server().Connect(context.Background(), l.g.Stdio(inR, outW), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(),
		&mcp.IOTransport{Reader: outR, Writer: inW, MaxLineLength: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	checkRefusedAndAlive(t, cs, l)
	// The id of the refused call was found in the stream: the error came
	// back to that call (above), not as a stray message.
}

func TestHTTPRefusesOversizedMessages(t *testing.T) {
	l := newLogged(t, "1MiB")
	srv := serveHTTP(t, l.g)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{token: "token-a"}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	checkRefusedAndAlive(t, cs, l)
}
