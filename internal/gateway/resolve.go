package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/cel"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// Resolver resolves path arguments in the view of a sandbox: server "" is
// the view of the profile's own sandboxes (the built-in tools'), another
// name that of the upstream server's sandbox. It returns the workspace in
// that view and, for each path, the file it names; an error for one path
// says why it names none.
type Resolver func(ctx context.Context, server string, paths []string) (workspace string, files []tools.Resolved, err error)

// decidedKey carries the files a call was decided on to the runner.
type decidedKey struct{}

// DecidedFiles are the files, by argument, that the policy decided the
// call being run on: the built-in runner holds the tool to them.
func DecidedFiles(ctx context.Context) map[string]toolpolicy.File {
	f, _ := ctx.Value(decidedKey{}).(map[string]toolpolicy.File)
	return f
}

// WithDecidedFiles is ctx carrying the files a call was decided on.
func WithDecidedFiles(ctx context.Context, files map[string]toolpolicy.File) context.Context {
	return context.WithValue(ctx, decidedKey{}, files)
}

// callSessionKey carries the MCP session a call came on.
type callSessionKey struct{}

// CallSession is the MCP session that made the call being resolved or run
// (nil for a call that has none: an approved call run after its session
// ended). What a built-in tool writes may be kept per session, and ends
// with it (see ServerSession.Wait).
func CallSession(ctx context.Context) *mcp.ServerSession {
	ss, _ := ctx.Value(callSessionKey{}).(*mcp.ServerSession)
	return ss
}

// CanonicalArgs decodes a call's arguments once, strictly, as the policy will
// decide them and the tool will receive them: field names exactly as the
// input schema spells them, no key given twice at any depth, no field the
// schema does not declare (declared nil: no check). It returns the
// arguments and their encoding, the bytes the tool is sent.
func CanonicalArgs(name string, raw []byte, declared map[string]bool) (map[string]any, json.RawMessage, error) {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := tools.NoDuplicates(raw); err != nil {
		return nil, nil, fmt.Errorf("the arguments of %s: %v", name, err)
	}
	args, err := cel.FromJSON(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the arguments of %s are not a JSON object: %v", name, err)
	}
	if declared != nil {
		for _, k := range slices.Sorted(maps.Keys(args)) {
			if !declared[k] {
				return nil, nil, fmt.Errorf("%s has no argument %q (its input schema declares %s; names are matched exactly)", name, k, list(declared))
			}
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, nil, fmt.Errorf("the arguments of %s: %v", name, err)
	}
	return args, b, nil
}

func list(m map[string]bool) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// Declared are the argument names of a tool's input schema: the keys of
// its properties.
func Declared(schema any) map[string]bool {
	b, err := json.Marshal(schema)
	if err != nil {
		return map[string]bool{}
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	json.Unmarshal(b, &s)
	out := map[string]bool{}
	for k := range s.Properties {
		out[k] = true
	}
	return out
}

// BuiltinDeclared are the arguments of the built-in tool name.
func BuiltinDeclared(name string) map[string]bool {
	if b := builtins[name]; b != nil {
		return Declared(b.InputSchema)
	}
	return nil
}

// ResolveFiles replaces each path argument of c (by the profile) with the
// file it resolves to in server's view ("" for the built-in tools'): the
// canonical path in Args, the file in Files, and the view's workspace.
// An argument that is not a string, or a path that cannot be resolved,
// is an error: the call is not decided on a string it cannot see as a
// file.
func ResolveFiles(ctx context.Context, p *profile.Profile, resolve Resolver, server string, c *toolpolicy.Call) error {
	if c.Tool == "list_files" && server == "" {
		if _, ok := c.Args["path"]; !ok {
			// The tool lists its working directory: decided as such.
			c.Args["path"] = "."
		}
	}
	var names, paths []string
	for _, arg := range p.PathArgs(c.Tool) {
		v, ok := c.Args[arg]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return fmt.Errorf("the argument %s of %s is a path: a non-empty string", arg, c.Tool)
		}
		names = append(names, arg)
		paths = append(paths, s)
	}
	if len(paths) == 0 {
		return nil
	}
	if resolve == nil {
		return fmt.Errorf("%s names files, and this gateway cannot resolve paths", c.Tool)
	}
	ws, files, err := resolve(ctx, server, paths)
	if err != nil {
		return fmt.Errorf("resolving the paths of %s: %v", c.Tool, err)
	}
	if len(files) != len(paths) {
		return fmt.Errorf("resolving the paths of %s: %d answers for %d paths", c.Tool, len(files), len(paths))
	}
	c.Workspace = ws
	c.Files = map[string]toolpolicy.File{}
	for i, arg := range names {
		r := files[i]
		if r.Error != "" {
			return fmt.Errorf("the path %q (%s) names no file cordon can resolve: %s", paths[i], arg, r.Error)
		}
		if !strings.HasPrefix(r.Path, "/") {
			return fmt.Errorf("the path %q (%s) resolved to %q, not an absolute path", paths[i], arg, r.Path)
		}
		c.Args[arg] = r.Path
		c.Files[arg] = PolicyFile(r.File)
	}
	return nil
}

// PolicyFile is a file as a resolver found it, as the policy decides on
// it and the gateway checks it again.
func PolicyFile(f tools.File) toolpolicy.File {
	return toolpolicy.File{Path: f.Path, Exists: f.Exists, Dir: f.Dir, Dev: f.Dev, Ino: f.Ino, Links: f.Links, Stamp: f.Stamp, Above: f.Above, Unsettled: f.Unsettled}
}

// canonical is a call as the policy decides it and the tool receives it:
// its arguments decoded strictly against the tool's schema, its paths
// resolved in the view of the sandbox that will act on them, and the
// bytes of the decided arguments.
func (g *Gateway) canonical(ctx context.Context, name string, raw json.RawMessage, resolve bool) (toolpolicy.Call, json.RawMessage, *toolpolicy.Decision) {
	g.mu.Lock()
	t := g.tools[name]
	var declared map[string]bool
	server := ""
	if t != nil {
		if t.declared == nil {
			t.declared = Declared(t.def.InputSchema)
		}
		declared, server = t.declared, t.server
	}
	g.mu.Unlock()
	c := toolpolicy.Call{Tool: name, Workspace: g.cfg.Workspace}
	args, _, err := CanonicalArgs(name, raw, declared)
	if err != nil {
		return c, nil, &toolpolicy.Decision{Rule: "arguments", Reason: err.Error()}
	}
	c.Args = args
	if t != nil && resolve {
		release, err := g.resolveSlot(ctx)
		if err != nil {
			return c, nil, &toolpolicy.Decision{Rule: "arguments", Reason: err.Error()}
		}
		err = ResolveFiles(ctx, g.cfg.Profile, g.cfg.Resolve, server, &c)
		release()
		if err != nil {
			return c, nil, &toolpolicy.Decision{Rule: "arguments", Reason: err.Error()}
		}
		if d := readsNothing(g.cfg.Profile, c); d != nil {
			return c, nil, d
		}
	}
	b, err := json.Marshal(c.Args)
	if err != nil {
		return c, nil, &toolpolicy.Decision{Rule: "arguments", Reason: err.Error()}
	}
	return c, b, nil
}

// redecide gives a call run without its decided files (an approved call
// run after its session ended) the files its paths name now, and refuses
// it when one of them no longer resolves to itself: the decided paths are
// canonical, so a path that resolves elsewhere was changed since.
func (g *Gateway) redecide(ctx context.Context, name string, raw json.RawMessage) (context.Context, error) {
	if ctx.Value(decidedKey{}) != nil {
		return ctx, nil
	}
	args, _, err := CanonicalArgs(name, raw, nil)
	if err != nil {
		return ctx, err
	}
	c := toolpolicy.Call{Tool: name, Args: maps.Clone(args)}
	if err := ResolveFiles(ctx, g.cfg.Profile, g.cfg.Resolve, "", &c); err != nil {
		return ctx, err
	}
	for arg, f := range c.Files {
		if args[arg] != f.Path {
			return ctx, fmt.Errorf("the path %v (%s) now resolves to %s, not the file that was decided on", args[arg], arg, f.Path)
		}
	}
	return WithDecidedFiles(ctx, c.Files), nil
}

// callRecord is the audit record of a decided call: its decided arguments,
// its files and workspace (what a replay decides on), and the arguments as
// the agent sent them when they differ.
func callRecord(c toolpolicy.Call, name string, decided, sent json.RawMessage, step int, session string, secret bool) map[string]any {
	rec := withArgs(map[string]any{"tool": name, "step": step, "session": session}, decided, secret)
	// Paths are the agent's text too: kept as its arguments are.
	r := redactor{secret: secret, budget: previewBytes}
	if c.Workspace != "" {
		rec["workspace"] = r.text(c.Workspace)
	}
	if len(c.Files) > 0 {
		files := make(map[string]toolpolicy.File, len(c.Files))
		for arg, f := range c.Files {
			f.Path = r.text(f.Path)
			files[r.text(arg)] = f
		}
		rec["files"] = files
	}
	if len(sent) > 0 && !sameJSON(sent, decided) {
		rec["sent"] = withArgs(map[string]any{}, sent, secret)["args"]
	}
	return rec
}

// refuseArguments records a call refused before the policy decided it
// (its arguments could not be decoded or its paths resolved), and is the
// refusal the agent gets.
func (g *Gateway) refuseArguments(s *session, name string, sent json.RawMessage, d toolpolicy.Decision) *mcp.CallToolResult {
	// What was sent is kept as its text (a key given twice, the case of
	// each name), bounded and redacted as any arguments are.
	s.mu.Lock()
	secret := s.carriesSecret()
	// Refused all the same: it counts toward the loop and probing rules.
	s.policy.RefusedBefore(toolpolicy.Call{Tool: name, Args: map[string]any{"sent": string(sent)}})
	cps := s.policy.TakeCheckpoints()
	s.mu.Unlock()
	for _, cp := range cps {
		g.cfg.Logf("session %s: at step %d, %s held (%s): %s", s.id, cp.Step, cp.Rule, cp.Action, cp.Reason)
		g.record(s, audit.Event{Kind: audit.Decision, Type: "trajectory_checkpoint", Data: cp})
	}
	r := redactor{secret: secret, budget: previewBytes}
	name = g.logName(name, secret)
	rec := map[string]any{"tool": name, "session": s.id, "sent": r.text(strings.ToValidUTF8(string(sent), "\uFFFD")), "sent_bytes": len(sent), "sent_sha256": digest(sent)}
	// The reason quotes what the agent sent (a name, a path): the log
	// keeps it as it keeps arguments; the agent is told it as it is.
	g.record(s,
		audit.Event{Kind: audit.Action, Type: "tool_call", Data: rec},
		audit.Event{Kind: audit.Decision, Type: "tool_decision", Data: map[string]any{"tool": name, "session": s.id, "allow": false, "rule": d.Rule, "reason": logReason(d.Reason, secret)}},
	)
	return refusal(d)
}

// created is the files a successful write named, resolved now that the
// write made them (nil: none, or they cannot be resolved): a file
// labelled only by its path, or by the identity of the file it replaced,
// would lose its labels when renamed.
func (g *Gateway) created(ctx context.Context, c toolpolicy.Call) *toolpolicy.Call {
	if g.cfg.Profile.Tools[c.Tool].Class != "write" || g.cfg.Resolve == nil {
		return nil
	}
	// Every file it named: one that existed may have been replaced (a
	// server writes a new file and renames it over the old one), and
	// its labels go with the file there now.
	n := toolpolicy.Call{Tool: c.Tool, Args: map[string]any{}, Workspace: c.Workspace}
	for arg, f := range c.Files {
		n.Args[arg] = f.Path
	}
	if len(n.Args) == 0 {
		return nil
	}
	g.mu.Lock()
	server := ""
	if t := g.tools[c.Tool]; t != nil {
		server = t.server
	}
	g.mu.Unlock()
	// Resolved where the call ran: its session's view (its values kept,
	// not its end).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := ResolveFiles(ctx, g.cfg.Profile, g.cfg.Resolve, server, &n); err != nil {
		return nil
	}
	return &n
}

// Resolving a call's paths starts a sandbox: at most resolvingPerGateway
// at once for one gateway (one agent's, under cordon serve), and
// resolvingInAll for every gateway of the process; a call waits for its
// turn, or for its context to end.
const (
	resolvingPerGateway = 4
	resolvingInAll      = 16
)

var resolvingAll = make(chan struct{}, resolvingInAll)

// resolveSlot waits for a turn to resolve paths; release gives it back.
func (g *Gateway) resolveSlot(ctx context.Context) (release func(), err error) {
	g.mu.Lock()
	if g.resolving == nil {
		g.resolving = make(chan struct{}, resolvingPerGateway)
	}
	mine := g.resolving
	g.mu.Unlock()
	select {
	case mine <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("the call ended while it waited to have its paths resolved: %w", ctx.Err())
	}
	select {
	case resolvingAll <- struct{}{}:
	case <-ctx.Done():
		<-mine
		return nil, fmt.Errorf("the call ended while it waited to have its paths resolved: %w", ctx.Err())
	}
	return func() { <-resolvingAll; <-mine }, nil
}

// readsNothing refuses a call of a tool of the read class that names a
// file that does not exist: a tool server may open another entry whose
// name it takes for the same (a Unicode equivalent), which no decision
// and no label rule saw. A name that does not exist is read by no one.
func readsNothing(p *profile.Profile, c toolpolicy.Call) *toolpolicy.Decision {
	if t, ok := p.Tools[c.Tool]; !ok || t.Class != "read" {
		return nil
	}
	for arg, f := range c.Files {
		if !f.Exists {
			return &toolpolicy.Decision{Rule: "arguments", Reason: fmt.Sprintf("%s reads, and %s names nothing there (%s): a name that does not exist is not read", c.Tool, arg, f.Path)}
		}
	}
	return nil
}
