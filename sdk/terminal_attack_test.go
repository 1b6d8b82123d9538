package sdk_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// floodTerminalServer answers a terminal with the WebSocket handshake,
// then total bytes of the command's output (binary messages of 60,000
// bytes, as cordon serve relays a terminal's output), then the outcome.
// What floods is any command's output: `yes` in the sandbox does it
// through a genuine cordon serve; a hostile server can too.
func floodTerminalServer(t *testing.T, total int, fragmented bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/sb-ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"sb-ok","agent":"a","state":"running"}`))
	})
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/terminal", func(w http.ResponseWriter, r *http.Request) {
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n")
		frame := func(op byte, payload []byte) error {
			fin := byte(0x80)
			if fragmented && op != 0x1 {
				// One message never finished: a first binary frame, then
				// continuations, none final.
				fin = 0
				if op == 0x2 {
					op = 0x0
				}
			}
			head := []byte{fin | op, 126, 0, 0}
			binary.BigEndian.PutUint16(head[2:], uint16(len(payload)))
			if len(payload) < 126 {
				head = []byte{fin | op, byte(len(payload))}
			}
			rw.Write(head)
			_, err := rw.Write(payload)
			return err
		}
		part := []byte(strings.Repeat("y\r\n", 20000))
		if fragmented {
			rw.Write([]byte{0x02, 3, 'y', '\r', '\n'}) // binary, not final
		}
		for sent := 0; sent < total; sent += len(part) {
			if err := frame(0x2, part); err != nil {
				return
			}
		}
		if !fragmented {
			frame(0x1, []byte(`{"type":"exit","outcome":{"status":"ok","exit_code":0}}`))
		}
		rw.Flush()
		// The client hangs up once it has the outcome.
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		bufio.NewReader(conn).ReadByte()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// The TypeScript Terminal keeps the output that comes before wait(), for
// wait()'s onData, up to a bound: a caller that waits for the outcome only
// (`await term.wait()`, onData being optional), or that never calls
// wait(), does not keep the command's whole output (`yes` in the sandbox,
// or a hostile server's) in memory.
func TestAttack_TerminalKeepsAllOutputWithoutOnData(t *testing.T) {
	srv := floodTerminalServer(t, 200<<20, false)
	text := runSDKScript(t, srv.URL, `
const term = await sb.terminal("yes");
const outcome = await term.wait(); // the outcome only: no onData
globalThis.gc?.();
const kept = term.early.reduce((n, b) => n + b.length, 0);
console.log(JSON.stringify({ status: outcome.status, kept, rss_mib: Math.round(process.memoryUsage().rss / 1048576) }));
`, "--expose-gc")
	if kept := keptOf(t, text); kept > 8<<20 {
		t.Errorf("after `await term.wait()` (no onData) the Terminal still holds %d MiB of the command's output, all of it: a command's output (or a hostile server's) grows the client's memory without bound", kept>>20)
	}
}

// MAX_MESSAGE (1 MiB) bounds a message the TypeScript Terminal takes, not
// only each of its frames: a hostile server's first frame and
// continuation frames that never end (FIN never set) are not gathered
// past it (the Python SDK bounds the whole message too).
func TestAttack_TerminalFragmentsUnbounded(t *testing.T) {
	srv := floodTerminalServer(t, 200<<20, true)
	text := runSDKScript(t, srv.URL, `
const term = await sb.terminal("yes");
let got = 0;
const outcome = await Promise.race([term.wait({ onData: (b) => (got += b.length) }).catch((e) => ({ error: e.message })), new Promise((r) => setTimeout(r, 10000).unref())]);
const kept = (term.fragments?.parts ?? []).reduce((n, b) => n + b.length, 0);
console.log(JSON.stringify({ outcome: outcome ?? null, got, kept, rss_mib: Math.round(process.memoryUsage().rss / 1048576) }));
term.close();
`)
	if kept := keptOf(t, text); kept > 8<<20 {
		t.Errorf("the Terminal gathered %d MiB of one unfinished message (frames of at most 1 MiB each): a hostile server grows the client's memory without bound", kept>>20)
	}
}

// keptOf is the "kept" number of the JSON line node printed.
func keptOf(t *testing.T, text string) int {
	t.Helper()
	i := strings.Index(text, `"kept":`)
	if i < 0 {
		t.Fatalf("no result from node")
	}
	kept, _ := strconv.Atoi(strings.SplitN(text[i+len(`"kept":`):], ",", 2)[0])
	return kept
}
