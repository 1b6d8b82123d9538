package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// builtins are the definitions of cordon's built-in tools as the agent
// sees them; each runs in a sandbox built from the profile.
var builtins = map[string]*mcp.Tool{
	"run": {
		Description: "Run a command in a sandbox built from the profile and return its output and outcome (status, exit code, the limit that stopped it, if any). The sandbox sees only the workspace and what the profile names, and reaches only the network destinations the profile allows.",
		InputSchema: schema(`{"type": "object", "properties": {"argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "the command and its arguments, as for exec"}}, "required": ["argv"], "additionalProperties": false}`),
	},
	"read_file": {
		Description: "Read a file that the profile lets the agent see. Text comes back as text, other content as base64; at most max_bytes (default 256 KiB).",
		InputSchema: schema(`{"type": "object", "properties": {"path": {"type": "string", "description": "absolute, or relative to the workspace"}, "max_bytes": {"type": "integer", "minimum": 1}}, "required": ["path"], "additionalProperties": false}`),
	},
	"write_file": {
		Description: "Write (or append to) a file where the profile lets the agent write.",
		InputSchema: schema(`{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "append": {"type": "boolean"}}, "required": ["path", "content"], "additionalProperties": false}`),
	},
	"list_files": {
		Description: "List a directory that the profile lets the agent see.",
		InputSchema: schema(`{"type": "object", "properties": {"path": {"type": "string", "description": "default: the workspace"}}, "additionalProperties": false}`),
	},
	"fetch": {
		Description: "Fetch a URL over HTTP or HTTPS through cordon's egress proxy: only the destinations the profile allows answer. At most max_bytes of the body (default 256 KiB).",
		InputSchema: schema(`{"type": "object", "properties": {"url": {"type": "string"}, "method": {"type": "string", "enum": ["GET", "HEAD"]}, "max_bytes": {"type": "integer", "minimum": 1}}, "required": ["url"], "additionalProperties": false}`),
	},
}

// IsBuiltin reports whether name is one of cordon's built-in tools.
func IsBuiltin(name string) bool { return builtins[name] != nil }

func schema(s string) json.RawMessage {
	if !json.Valid([]byte(s)) {
		panic("invalid built-in schema: " + s)
	}
	return json.RawMessage(s)
}
