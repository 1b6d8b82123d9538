package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sandbox is one sandbox of a server, shaped like the hosted sandboxes'
// SDKs (E2B's): Commands runs commands in it, Files moves files in and
// out, KeepAlive holds it, Kill ends it.
//
//	sb, err := c.CreateSandbox(ctx, "")
//	defer sb.Kill(ctx)
//	res, err := sb.Commands.Run(ctx, "make test", &client.RunOptions{Stdout: os.Stdout})
type Sandbox struct {
	// ID names the sandbox on its server.
	ID string
	// Info is the sandbox as the server last described it (at its
	// creation, or the last KeepAlive or Refresh).
	Info     SandboxInfo
	Commands *Commands
	Files    *Files
	c        *Client
}

func (c *Client) sandbox(info SandboxInfo) *Sandbox {
	sb := &Sandbox{ID: info.ID, Info: info, c: c}
	sb.Commands, sb.Files = &Commands{sb}, &Files{sb}
	return sb
}

// CreateSandbox claims a sandbox of agent ("" is the token's own).
func (c *Client) CreateSandbox(ctx context.Context, agent string) (*Sandbox, error) {
	info, err := c.Create(ctx, agent)
	if err != nil {
		return nil, err
	}
	return c.sandbox(info), nil
}

// CreateOptions are what a sandbox is created with: its agent ("" is the
// token's own), the environment of all its commands (a command's own Env
// wins), and its timeout (0: the agent's max_lifetime, its upper bound).
type CreateOptions struct {
	Agent   string
	Env     map[string]string
	Timeout time.Duration
}

// CreateSandboxWith claims a sandbox as o says.
func (c *Client) CreateSandboxWith(ctx context.Context, o CreateOptions) (*Sandbox, error) {
	req := CreateRequest{Agent: o.Agent, Env: o.Env}
	if o.Timeout > 0 {
		req.Timeout = o.Timeout.String()
	}
	info, err := c.CreateWith(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.sandbox(info), nil
}

// ConnectSandbox returns the sandbox id, created earlier, without asking
// the server (its Info holds only the id until Refresh).
func (c *Client) ConnectSandbox(id string) *Sandbox { return c.sandbox(SandboxInfo{ID: id}) }

// Kill ends the sandbox and everything in it.
func (s *Sandbox) Kill(ctx context.Context) error {
	info, err := s.c.Kill(ctx, s.ID)
	if err == nil {
		s.Info = info
	}
	return err
}

// KeepAlive restarts the sandbox's idle timeout (the server's
// idle_timeout; its max_lifetime still holds).
func (s *Sandbox) KeepAlive(ctx context.Context) error {
	info, err := s.c.KeepAlive(ctx, s.ID)
	if err == nil {
		s.Info = info
	}
	return err
}

// GetInfo asks the server how the sandbox is: its state, why it ended,
// its timeouts and counters.
func (s *Sandbox) GetInfo(ctx context.Context) (SandboxInfo, error) {
	info, err := s.c.Get(ctx, s.ID)
	if err == nil {
		s.Info = info
	}
	return info, err
}

// Refresh is GetInfo.
func (s *Sandbox) Refresh(ctx context.Context) (SandboxInfo, error) { return s.GetInfo(ctx) }

// IsRunning reports whether the sandbox still runs (false too when the
// server no longer knows it).
func (s *Sandbox) IsRunning(ctx context.Context) (bool, error) {
	info, err := s.GetInfo(ctx)
	var nf *NotFoundError
	var gone *SandboxEndedError
	if errors.As(err, &nf) || errors.As(err, &gone) {
		return false, nil
	}
	return err == nil && info.State == "running", err
}

// ListSandboxes describes the sandboxes the token may see.
func (c *Client) ListSandboxes(ctx context.Context) ([]SandboxInfo, error) { return c.List(ctx) }

// Terminal starts a command on a pseudo-terminal in the sandbox (see
// Client.Terminal): write to it, resize or signal it, and Wait for its
// outcome with its output as it comes.
func (s *Sandbox) Terminal(ctx context.Context, o TerminalOptions) (*Terminal, error) {
	return s.c.Terminal(ctx, s.ID, o)
}

// PortURL is a URL that opens port of the sandbox in a browser (no token
// needed) for ttl (0: 15m; at most 1h, never past the sandbox's end).
func (s *Sandbox) PortURL(ctx context.Context, port int, ttl time.Duration) (string, error) {
	u, _, err := s.c.SignedPortURL(ctx, s.ID, port, ttl)
	return u, err
}

// Commands runs commands in a sandbox.
type Commands struct{ sb *Sandbox }

// RunOptions are a command's environment, directory, input, timeout and
// where its output goes as it comes. Every field is optional.
type RunOptions struct {
	Env   map[string]string
	Dir   string // absolute, inside the sandbox; default the sandbox's
	Stdin []byte
	// Timeout ends the command after this long (at least 1ms, at most the
	// profile's wall limit, which holds without it): a LimitError with
	// StatusTimeout.
	Timeout time.Duration
	// Stdout and Stderr receive the output as it comes (E2B's on_stdout
	// and on_stderr); the CommandResult holds all of it as well.
	Stdout, Stderr io.Writer
}

// CommandResult is a command's output and how it ended.
type CommandResult struct {
	Stdout, Stderr string
	// ExitCode is the status cordon run would exit with: the command's
	// own when it exited, 128+N when signal N killed it, 124 for a
	// timeout and another of 114-123 for another limit (README, "Exit
	// statuses").
	ExitCode int
	// Status is the outcome's status (ok, exit_nonzero, a limit's, ...).
	Status  Status
	Outcome Outcome
}

// Run runs cmd with sh -c in the sandbox, its output streamed as it
// comes, and returns its result. A command that did not end with status
// ok (exit status 0) is an error too, with the result: a *CommandExitError,
// or a *LimitError (which wraps one) when a limit ended it. An error of
// the server (no such sandbox, a refusal) is an *Error, without a result.
func (c *Commands) Run(ctx context.Context, cmd string, o *RunOptions) (*CommandResult, error) {
	return c.RunArgs(ctx, []string{"sh", "-c", cmd}, o)
}

// RunArgs is Run with an argv, run as it is, without a shell.
func (c *Commands) RunArgs(ctx context.Context, args []string, o *RunOptions) (*CommandResult, error) {
	if o == nil {
		o = &RunOptions{}
	}
	req := ExecRequest{Args: args, Env: o.Env, Dir: o.Dir, Stdin: o.Stdin}
	if o.Timeout > 0 {
		req.Timeout = o.Timeout.String()
	}
	var stdout, stderr bytes.Buffer
	out, errw := io.Writer(&stdout), io.Writer(&stderr)
	if o.Stdout != nil {
		out = io.MultiWriter(&stdout, o.Stdout)
	}
	if o.Stderr != nil {
		errw = io.MultiWriter(&stderr, o.Stderr)
	}
	oc, err := c.sb.c.Exec(ctx, c.sb.ID, req, out, errw)
	if err != nil {
		return nil, err
	}
	res := &CommandResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: oc.ExitCode, Status: oc.Status, Outcome: oc}
	return res, resultError(res, c.sb.ID)
}

// CommandHandle is a command running in the background in a sandbox
// (Commands.Start): Wait for its result, or Kill it.
type CommandHandle struct {
	ID   string
	Args []string
	sb   *Sandbox
}

// Start starts cmd with sh -c in the background in the sandbox: it is
// answered as soon as it started, and runs on (holding one of the agent's
// command slots) until it ends, is killed, or the sandbox ends. Its
// output is kept for Wait (RunOptions' Stdout and Stderr are not used).
func (c *Commands) Start(ctx context.Context, cmd string, o *RunOptions) (*CommandHandle, error) {
	return c.StartArgs(ctx, []string{"sh", "-c", cmd}, o)
}

// StartArgs is Start with an argv, run as it is.
func (c *Commands) StartArgs(ctx context.Context, args []string, o *RunOptions) (*CommandHandle, error) {
	if o == nil {
		o = &RunOptions{}
	}
	req := ExecRequest{Args: args, Env: o.Env, Dir: o.Dir, Stdin: o.Stdin, Background: true}
	if o.Timeout > 0 {
		req.Timeout = o.Timeout.String()
	}
	var cmd Command
	if err := c.sb.c.call(ctx, http.MethodPost, sandboxPath(c.sb.ID, "/exec"), req, &cmd); err != nil {
		return nil, err
	}
	return &CommandHandle{ID: cmd.ID, Args: cmd.Args, sb: c.sb}, nil
}

// List describes the sandbox's background commands, oldest first.
func (c *Commands) List(ctx context.Context) ([]Command, error) {
	var list []Command
	err := c.sb.c.call(ctx, http.MethodGet, sandboxPath(c.sb.ID, "/commands"), nil, &list)
	return list, err
}

// Connect is the background command id, started earlier.
func (c *Commands) Connect(id string) *CommandHandle { return &CommandHandle{ID: id, sb: c.sb} }

// Wait waits for the command to end and returns its result: as Run's, a
// *CommandExitError or *LimitError when its outcome is not ok.
func (h *CommandHandle) Wait(ctx context.Context) (*CommandResult, error) {
	for {
		// The command while it runs (it has an id), or its result.
		var ans struct {
			ID *string `json:"id"`
			ExecResult
		}
		if err := h.sb.c.call(ctx, http.MethodGet, sandboxPath(h.sb.ID, "/commands/"+url.PathEscape(h.ID)+"?wait=1"), nil, &ans); err != nil {
			return nil, err
		}
		if ans.ID != nil {
			continue // given up before it ended (a proxy's timeout): again
		}
		res := ans.ExecResult
		r := &CommandResult{Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.Outcome.ExitCode, Status: res.Outcome.Status, Outcome: res.Outcome}
		return r, resultError(r, h.sb.ID)
	}
}

// Kill ends the command (its process group).
func (h *CommandHandle) Kill(ctx context.Context) error {
	return h.sb.c.call(ctx, http.MethodPost, sandboxPath(h.sb.ID, "/commands/"+url.PathEscape(h.ID)+"/kill"), nil, nil)
}

// Files moves files in and out of a sandbox.
type Files struct{ sb *Sandbox }

// Read returns the content of the file at path inside the sandbox.
func (f *Files) Read(ctx context.Context, path string) ([]byte, error) {
	var b bytes.Buffer
	if err := f.sb.c.Download(ctx, f.sb.ID, path, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes data to the file at path inside the sandbox (mode 0644),
// replacing what it held.
func (f *Files) Write(ctx context.Context, path string, data []byte) error {
	return f.sb.c.Upload(ctx, f.sb.ID, path, bytes.NewReader(data), 0)
}

// ReadTar writes the directory at path inside the sandbox to w as a tar
// stream (links as links, never followed); an archive cut short is an
// error.
func (f *Files) ReadTar(ctx context.Context, path string, w io.Writer) (TarResult, error) {
	return f.sb.c.DownloadTar(ctx, f.sb.ID, path, w)
}

// WriteTar extracts the tar stream r into the directory at path inside the
// sandbox (which must exist), as its user, under its rules.
func (f *Files) WriteTar(ctx context.Context, path string, r io.Reader) (TarResult, error) {
	return f.sb.c.UploadTar(ctx, f.sb.ID, path, r)
}

// Remove removes the file, link or directory (with everything in it) at
// path inside the sandbox.
func (f *Files) Remove(ctx context.Context, path string) error {
	return f.sb.c.Remove(ctx, f.sb.ID, path, true)
}

// Rename renames the entry at from to to, inside the sandbox.
func (f *Files) Rename(ctx context.Context, from, to string) error {
	return f.sb.c.Rename(ctx, f.sb.ID, from, to)
}

// MakeDir makes the directory at path inside the sandbox, with its
// parents; false when it was there already.
func (f *Files) MakeDir(ctx context.Context, path string) (bool, error) {
	return f.sb.c.MakeDir(ctx, f.sb.ID, path)
}

// GetInfo describes the entry at path inside the sandbox (a link not
// followed); a *NotFoundError when there is none.
func (f *Files) GetInfo(ctx context.Context, path string) (EntryInfo, error) {
	fi, err := f.sb.c.Stat(ctx, f.sb.ID, path)
	if err != nil {
		return EntryInfo{}, err
	}
	return entryInfo(fi.Path, fi.DirEntry), nil
}

// Exists reports whether there is an entry at path inside the sandbox.
func (f *Files) Exists(ctx context.Context, path string) (bool, error) {
	_, err := f.sb.c.Stat(ctx, f.sb.ID, path)
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// WatchDir watches the directory at path inside the sandbox (and its
// subdirectories, with recursive; links are not followed) and returns
// once the watch is in place: Next gives each change as it comes.
// Cancelling ctx, or Stop, ends it.
func (f *Files) WatchDir(ctx context.Context, path string, recursive bool) (*WatchHandle, error) {
	w, err := f.sb.c.WatchDir(ctx, f.sb.ID, path, recursive)
	if err != nil {
		return nil, err
	}
	return &WatchHandle{w: w}, nil
}

// WatchHandle is a watch of a directory of a sandbox. EndReason says why
// the server ended it, once Next returned io.EOF ("" when it was stopped
// here, or the connection was lost).
type WatchHandle struct {
	EndReason string
	w         *Watch
}

// FilesystemEvent is a change under a watched directory: Type is
// "create", "write", "remove", "rename" (moved away, under its old name),
// "chmod" or "overflow" (events were lost: list the directory again); Name
// the entry's path relative to the directory ("" for the directory
// itself).
type FilesystemEvent struct {
	Type, Name string
	IsDir      bool
}

// Next waits for the next change; io.EOF once the watch ended.
func (h *WatchHandle) Next() (FilesystemEvent, error) {
	e, err := h.w.Next()
	if err != nil {
		h.EndReason = h.w.EndReason()
		return FilesystemEvent{}, err
	}
	name := e.Name
	if e.NameBase64 != nil {
		name = string(e.NameBase64)
	}
	return FilesystemEvent{Type: e.Type, Name: name, IsDir: e.Dir}, nil
}

// Stop ends the watch.
func (h *WatchHandle) Stop() error { return h.w.Close() }

// EntryInfo is one entry of a directory: Type is "file", "dir",
// "symlink" or "other"; Mode the permission bits (with setuid, setgid and
// sticky); SymlinkTarget a symlink's target.
type EntryInfo struct {
	Name, Path, Type string
	Size             int64
	Mode             uint32
	ModifiedTime     time.Time
	SymlinkTarget    string
}

// List returns the entries of the directory at path inside the sandbox,
// sorted by name (at most the server's default count, 1000).
func (f *Files) List(ctx context.Context, path string) ([]EntryInfo, error) {
	l, err := f.sb.c.ListDir(ctx, f.sb.ID, path, 0)
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSuffix(l.Path, "/") + "/"
	out := make([]EntryInfo, 0, len(l.Entries))
	for _, e := range l.Entries {
		out = append(out, entryInfo(dir+e.Name, e))
	}
	return out, nil
}

func entryInfo(path string, e DirEntry) EntryInfo {
	mode, _ := strconv.ParseUint(e.Mode, 8, 32)
	return EntryInfo{Name: e.Name, Path: path, Type: e.Type, Size: e.Size, Mode: uint32(mode), ModifiedTime: e.Modified, SymlinkTarget: e.Target}
}
