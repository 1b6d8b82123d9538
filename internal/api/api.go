// Package api holds the types of cordon serve's HTTP JSON API, shared by the
// server and its Go client. It is pure: no I/O. The API itself is described
// in docs/openapi.yaml.
package api

import (
	"time"

	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// Version is the path prefix of this API.
const Version = "/v1"

// CreateRequest asks for a sandbox of an agent. Agent may be empty: the
// token's own agent. Exec, when set, is run in the sandbox at once (one
// round trip for a sandbox and its first command); its output comes back
// whole, in the answer's Result.
type CreateRequest struct {
	Agent string       `json:"agent,omitempty"`
	Exec  *ExecRequest `json:"exec,omitempty"`
}

// Sandbox describes one sandbox of the server.
type Sandbox struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// Node is the server that runs it, when several share a database.
	Node string `json:"node,omitempty"`
	// Profile is the profile file and ProfileSHA256 its digest when the
	// sandbox was built.
	Profile       string    `json:"profile"`
	ProfileSHA256 string    `json:"profile_sha256"`
	Created       time.Time `json:"created"`
	// Warm says the sandbox came from the pre-warmed pool; ColdStartMS is
	// how long building it took when it did not.
	Warm        bool  `json:"warm"`
	ColdStartMS int64 `json:"cold_start_ms,omitempty"`
	// State is "running", or "ended" with Ended saying why: "killed",
	// "idle_timeout", "max_lifetime", a limit's name, "drift", or
	// "first_command" (its first command could not be run).
	State string `json:"state"`
	Ended string `json:"ended,omitempty"`
	// Commands counts the commands run in it; Running those running now.
	Commands int `json:"commands"`
	Running  int `json:"running"`
	// IdleExpires and Expires are when the idle and the absolute timeouts
	// end it.
	IdleExpires time.Time `json:"idle_expires"`
	Expires     time.Time `json:"expires"`
	// Session holds the session's counters (see docs/SERVER.md).
	Session *Session `json:"session,omitempty"`
	// Result is the first command's, for a create that asked for one (a
	// first command that could not be run answers an Error instead).
	Result *ExecResult `json:"result,omitempty"`
}

// Session is the counters of the task a sandbox serves.
type Session struct {
	Steps      int      `json:"steps"`
	BytesOut   int64    `json:"bytes_out"`
	BytesIn    int64    `json:"bytes_in"`
	Hosts      []string `json:"hosts"`
	Denials    int      `json:"denials"`
	Checkpoint string   `json:"checkpoint,omitempty"`
}

// ExecRequest is one command to run in a sandbox.
type ExecRequest struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env,omitempty"`
	Dir  string            `json:"dir,omitempty"`
	// Stdin is the command's input; none when empty.
	Stdin []byte `json:"stdin,omitempty"`
	// Stream asks for the output as it comes, as JSON lines (ExecEvent),
	// the outcome last; otherwise one ExecResult.
	Stream bool `json:"stream,omitempty"`
}

// ExecEvent is one line of a streamed exec: output, or the outcome last.
type ExecEvent struct {
	Stdout  []byte           `json:"stdout,omitempty"`
	Stderr  []byte           `json:"stderr,omitempty"`
	Outcome *outcome.Outcome `json:"outcome,omitempty"`
	// Error is set, last, when the command could not be run.
	Error string `json:"error,omitempty"`
	// Replay is set when the event is the kept answer of an earlier
	// request with the same idempotency key.
	Replay *Replay `json:"replay,omitempty"`
}

// Replay describes an answer given again for an idempotency key: the
// outcome is the one kept, the output is not (only its size and SHA-256).
type Replay struct {
	Key          string `json:"key"`
	StdoutBytes  int64  `json:"stdout_bytes"`
	StdoutSHA256 string `json:"stdout_sha256"`
	StderrBytes  int64  `json:"stderr_bytes"`
	StderrSHA256 string `json:"stderr_sha256"`
	Note         string `json:"note"`
}

// ExecResult is the answer to an exec that did not stream.
type ExecResult struct {
	Stdout  []byte          `json:"stdout"`
	Stderr  []byte          `json:"stderr"`
	Outcome outcome.Outcome `json:"outcome"`
	// Replay is set when this is the kept answer of an earlier request
	// with the same idempotency key: Stdout and Stderr are then empty.
	Replay *Replay `json:"replay,omitempty"`
}

// Error is the body of every answer that is not a success. Sandbox names
// the sandbox a create made and ended because its first command could not
// be run.
type Error struct {
	Error   string `json:"error"`
	Sandbox string `json:"sandbox,omitempty"`
}

// Health is the answer of GET /v1/health. Status is "ok", "degraded"
// (Reasons say why) or "stopping".
type Health struct {
	Status    string         `json:"status"`
	Version   string         `json:"version"`
	Sandboxes int            `json:"sandboxes"`
	Warm      int            `json:"warm"`
	Reasons   []HealthReason `json:"reasons,omitempty"`
}

// HealthReason is one reason a server is degraded: Reason is
// "audit_log", "database", "disk" or "builds"; Detail says what failed.
type HealthReason struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// Decision is the body of an approval's approve or deny.
type Decision struct {
	Reason  string `json:"reason,omitempty"`
	Session bool   `json:"session,omitempty"`
}
