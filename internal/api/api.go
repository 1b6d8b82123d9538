// Package api holds the types of cordon serve's HTTP JSON API, shared by the
// server and its Go client. It is pure: no I/O. The API itself is described
// in internal/server/openapi.yaml.
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
	// Env is set for every command of the sandbox, its first included;
	// a command's own env wins over it.
	Env map[string]string `json:"env,omitempty"`
	// Timeout ends the sandbox this long after its creation (a duration,
	// such as 30m); at most the agent's max_lifetime, which holds
	// without it. A keep-alive does not move it.
	Timeout string `json:"timeout,omitempty"`
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
	// Reviewed says its workspace is reviewed (workspace.mode: review):
	// its writes wait in a change set (GET .../changes) until applied.
	Reviewed bool `json:"reviewed,omitempty"`
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
	// Timeout ends the command after this long, a duration such as "30s"
	// or "2m"; at most the profile's wall limit, which applies without it.
	// A command it ends has the outcome timeout, limit "timeout".
	Timeout string `json:"timeout,omitempty"`
	// Background answers 202 with the Command as soon as it started; its
	// output and outcome are asked for later (GET .../commands/{id}).
	Background bool `json:"background,omitempty"`
}

// ExecEvent is one line of a streamed exec: output, or the outcome last.
// StdoutText and StderrText are the same piece of output as text, set
// when it is valid UTF-8 (a piece never ends inside a character: the
// server holds such a start back for the next piece).
type ExecEvent struct {
	Stdout     []byte           `json:"stdout,omitempty"`
	StdoutText string           `json:"stdout_text,omitempty"`
	Stderr     []byte           `json:"stderr,omitempty"`
	StderrText string           `json:"stderr_text,omitempty"`
	Outcome    *outcome.Outcome `json:"outcome,omitempty"`
	// Error is set, last, when the command could not be run, and
	// HTTPStatus is the status the same request without stream would
	// have been answered with (409, 410, 423, ...).
	Error      string `json:"error,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
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

// ExecResult is the answer to an exec that did not stream. StdoutText
// and StderrText are the output as text, set when it is valid UTF-8 (nil,
// and absent from the JSON, otherwise).
type ExecResult struct {
	Stdout     []byte          `json:"stdout"`
	Stderr     []byte          `json:"stderr"`
	StdoutText *string         `json:"stdout_text,omitempty"`
	StderrText *string         `json:"stderr_text,omitempty"`
	Outcome    outcome.Outcome `json:"outcome"`
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
	// Approval is the approval request a step is held for (423): the
	// request to send again, unchanged, once a person approved it.
	Approval string `json:"approval,omitempty"`
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

// DirListing is the answer of GET /v1/sandboxes/{id}/files/list: the
// entries of one directory inside the sandbox, sorted by name. Truncated
// says that the directory holds more than were listed.
type DirListing struct {
	Path      string     `json:"path"`
	Entries   []DirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// DirEntry is one entry of a DirListing. Name is the entry's name as text,
// with every byte that is not UTF-8 replaced by U+FFFD; NameBase64, set
// only then, holds the exact bytes. Target and TargetBase64 are a
// symlink's target, likewise (never followed).
type DirEntry struct {
	Name       string `json:"name"`
	NameBase64 []byte `json:"name_base64,omitempty"`
	// Type is "file", "dir", "symlink" or "other".
	Type         string `json:"type"`
	Target       string `json:"target,omitempty"`
	TargetBase64 []byte `json:"target_base64,omitempty"`
	Size         int64  `json:"size"`
	// Mode is the permission bits with setuid, setgid and sticky, in
	// octal ("0755").
	Mode     string    `json:"mode"`
	Modified time.Time `json:"modified"`
}

// FileEvent is a change under a watched directory, as GET .../files/watch
// streams them, a JSON object per line.
type FileEvent struct {
	// Type is "create" (made, or moved in), "write", "remove", "rename"
	// (moved away, under its old name: a "create" names the new one when
	// it stays under the directory), "chmod" (permissions, owner or
	// times), "overflow" (events were lost: list the directory again), or
	// "end", the last line when the server ends the watch, with Reason.
	Type string `json:"type"`
	// Name is the entry's path relative to the watched directory ("" for
	// the directory itself); NameBase64 its bytes when they are not UTF-8.
	Name       string `json:"name,omitempty"`
	NameBase64 []byte `json:"name_base64,omitempty"`
	// Dir says the entry is a directory.
	Dir    bool   `json:"dir,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// FileInfo describes one entry of a sandbox, as GET .../files/stat
// answers: its DirEntry (a link not followed) and its path.
type FileInfo struct {
	DirEntry
	Path string `json:"path"`
}

// TarResult is the answer of PUT /v1/sandboxes/{id}/files/tar: the
// entries extracted and the bytes of file content they hold, as the
// sandbox reported them, and the bytes of the archive received.
type TarResult struct {
	Path         string `json:"path"`
	Entries      int64  `json:"entries"`
	Bytes        int64  `json:"bytes"`
	ArchiveBytes int64  `json:"archive_bytes"`
	// Changes, in a guarded workspace, is what landed of what was
	// extracted, and what waits (see outcome.Changes).
	Changes *outcome.Changes `json:"changes,omitempty"`
}

// TerminalMessage is a text message of GET /v1/sandboxes/{id}/terminal
// (a WebSocket; binary messages carry the terminal's bytes both ways).
// From the client: "input" (Data), "resize" (Rows, Cols) or "signal"
// (Signal, such as "SIGINT", to the command's process group). From the
// server, last: "exit" (Outcome) or "error" (Error).
type TerminalMessage struct {
	Type    string           `json:"type"`
	Data    []byte           `json:"data,omitempty"`
	Rows    uint16           `json:"rows,omitempty"`
	Cols    uint16           `json:"cols,omitempty"`
	Signal  string           `json:"signal,omitempty"`
	Outcome *outcome.Outcome `json:"outcome,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// PortURLRequest asks for a port URL (POST /v1/sandboxes/{id}/port-urls):
// the sandbox's port, and how long the URL holds (default 15m, at most
// 1h, never past the sandbox's end).
type PortURLRequest struct {
	Port      int    `json:"port"`
	ExpiresIn string `json:"expires_in,omitempty"`
}

// PortURL is a port URL: the path (on the server that made it) that opens
// the port for anyone who has it, until Expires.
type PortURL struct {
	Path    string    `json:"path"`
	Expires time.Time `json:"expires"`
}

// Command is a background command of a sandbox: State "running" or
// "ended", with its Outcome once it ended (none when it could not run).
type Command struct {
	ID      string           `json:"id"`
	Args    []string         `json:"args"`
	Started time.Time        `json:"started"`
	State   string           `json:"state"`
	Outcome *outcome.Outcome `json:"outcome,omitempty"`
}
