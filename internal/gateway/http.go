package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// drainBytes is how much of a body over the bound is still read (to hash
// it, and so that the client, still sending, reads the answer); past it
// the connection is closed.
const drainBytes = 256 << 20

// HTTPHandler serves the gateway over streamable HTTP with each request's
// body bounded by MessageCap: a larger one is answered 413 with a JSON-RPC
// error (which a client takes as the refusal of that one request, not the
// end of its session), and recorded by its size and digest.
func (g *Gateway) HTTPHandler() http.Handler {
	limit := MessageCap(g.cfg.Profile)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: limit})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		var body []byte
		if r.ContentLength <= limit {
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
				return
			}
			if int64(len(body)) <= limit {
				r.Body = io.NopCloser(bytes.NewReader(body))
				h.ServeHTTP(w, r)
				return
			}
		}
		over := &oversized{h: sha256.New()}
		over.write(body)
		n, _ := io.Copy(writerFunc(over.write), io.LimitReader(r.Body, drainBytes))
		if n == drainBytes {
			w.Header().Set("Connection", "close")
		}
		id := json.RawMessage("null")
		if v := over.id.value(); v != nil {
			id = v
		}
		msg := fmt.Sprintf("cordon refused this message: it is %d bytes or more, more than the bound of %d bytes (session.max_argument_bytes of the profile, and %d bytes for the rest of the message); the session goes on", over.n, limit, envelopeBytes)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32600, "message": msg}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write(b)
		g.recordRefused(over, limit, id)
	})
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) {
	f(b)
	return len(b), nil
}
