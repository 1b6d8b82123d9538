package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxDefinition is the largest canonical definition of an upstream tool
// the gateway keeps, in bytes; a larger one is withdrawn, and not kept.
const MaxDefinition = 256 << 10

// MaxTools is how many tools of one server the gateway keeps; the listing
// stops there.
const MaxTools = 1000

// Canonical is the encoding a tool's pin is the SHA-256 of: the definition
// exactly as the agent is shown it (every field the SDK decoded from the
// server's listing: name, title, description, input and output schemas,
// annotations, _meta, icons) as JSON, the keys of every object in sorted
// order, without spaces or HTML escapes. Fields of the server's listing
// that the SDK does not know are dropped when it is decoded, and so never
// reach the agent: what is pinned is what is served.
func Canonical(t *mcp.Tool) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding the definition of %s: %w", t.Name, err)
	}
	return CanonicalJSON(b)
}

// CanonicalJSON is the JSON value b in the encoding of Canonical.
func CanonicalJSON(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not one JSON value: more follows it")
	}
	return encode(v, "")
}

// Pretty is the JSON value b indented for a reviewer, keys in the order of
// Canonical.
func Pretty(b []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return encode(v, "  ")
}

func encode(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// HashOf is the pin of a canonical definition.
func HashOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Hash is the pin of a tool: the SHA-256 of its Canonical definition, ""
// when it has none.
func Hash(t *mcp.Tool) string {
	b, err := Canonical(t)
	if err != nil {
		return ""
	}
	return HashOf(b)
}

// pin is the canonical definition of t and its hash, or why it cannot be
// pinned.
func pin(t *mcp.Tool) ([]byte, string, error) {
	b, err := Canonical(t)
	if err != nil {
		return nil, "", err
	}
	if len(b) > MaxDefinition {
		return nil, "", fmt.Errorf("its definition is %d bytes, more than the %d cordon keeps", len(b), MaxDefinition)
	}
	return b, HashOf(b), nil
}

// offer adds t to the tools the agent is shown. The SDK panics on some
// definitions (an input schema that is not an object); such a tool is not
// offered, and err says why. g.mu is held.
func (g *Gateway) offer(t *tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	g.server.AddTool(t.def, g.gate(g.runUpstream))
	return nil
}
