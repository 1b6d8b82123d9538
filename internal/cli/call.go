package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// callCmd implements `cordon call [flags] TOOL ARGS-JSON`: one call of a
// built-in tool as the tool gateway makes it. The profile's tool policy
// decides it (as a session of one call); an allowed call runs inside a
// sandbox built from the profile, which is all the tool can reach. Exit
// status 0 when the tool succeeded, 1 when it was refused or failed.
func callCmd(e *env, args []string) int {
	fs := newFlags(e, "call", "call [flags] TOOL ARGS-JSON")
	var pf profileFlags
	auditLog := callFlags(fs, &pf)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if len(operands) != 2 {
		fs.Usage()
		return fail(e, fmt.Errorf("call: name a tool and its arguments as a JSON object"))
	}
	name := operands[0]
	if name != runTool && !slices.Contains(tools.Names, name) {
		return fail(e, fmt.Errorf("call: %s is not a built-in tool (%s, %s)", name, strings.Join(tools.Names, ", "), runTool))
	}
	// The arguments are decoded as the gateway decodes them: once,
	// strictly, by the tool's schema; what the policy decides is what runs.
	c := toolpolicy.Call{Tool: name}
	if c.Args, _, err = gateway.CanonicalArgs(name, []byte(operands[1]), gateway.BuiltinDeclared(name)); err != nil {
		return fail(e, fmt.Errorf("call: %v", err))
	}
	if name == runTool {
		if _, err := runArgv([]byte(operands[1])); err != nil {
			return fail(e, err)
		}
	}
	p, allow, al, err := pf.open(e, nil, *auditLog)
	if err != nil {
		return fail(e, err)
	}
	if err := oneShotRefused(p, name); err != nil {
		return fail(e, fmt.Errorf("call: %w", err))
	}
	r := &probeRunner{e: e, allow: allow, audit: al, guard: pf.guarded(e)}
	if err := gateway.ResolveFiles(context.Background(), p, resolver(e, p, "", r, nil, nil), "", &c); err != nil {
		return fail(e, fmt.Errorf("call: %v", err))
	}
	decided, _ := json.Marshal(c.Args)
	d := toolpolicy.NewSession(p, nil).Decide(c)
	// The call and its decision are on the record before anything runs;
	// the sandbox's own events (what ran, its result) follow.
	a := al.run(p)
	if err := a.log.Append(
		a.event(audit.Action, "tool_call", c),
		a.event(audit.Decision, "tool_decision", map[string]any{"tool": name, "allow": d.Allow, "rule": d.Rule, "reason": d.Reason}),
	); err != nil {
		return fail(e, fmt.Errorf("audit log: %w (the call is not recorded, and was not made)", err))
	}
	if d.Approval {
		fmt.Fprintf(e.stderr, "cordon: %s is held by %s: %s; cordon call makes no call that needs approval (cordon mcp holds it for an approver)\n", name, d.Rule, d.Reason)
		return 1
	}
	if !d.Allow {
		fmt.Fprintf(e.stderr, "cordon: %s refused by %s: %s\n", name, d.Rule, d.Reason)
		if d.Hint != "" {
			fmt.Fprintf(e.stderr, "cordon: %s\n", d.Hint)
		}
		return 1
	}
	out, failed, err := runBuiltin(r.oneShot(p), name, decided, expects(p, c.Files))
	if err != nil {
		return fail(e, err)
	}
	e.stdout.Write(out)
	if failed {
		return 1
	}
	return 0
}

// runBuiltin runs the built-in tool name with its JSON arguments through
// x (a sandbox built from the profile) and returns its JSON result; failed
// says the tool failed (the result says why, a run tool's command did not
// succeed), err that it could not be run at all.
// callFlags registers cordon call's flags: pf's and the audit log's.
func callFlags(fs *flag.FlagSet, pf *profileFlags) (auditLog *string) {
	pf.register(fs)
	pf.registerLintGate(fs)
	return fs.String("audit-log", "", "append the call's audit events to `FILE` (default: the configuration's)")
}

func runBuiltin(x toolExec, name string, args []byte, expect []string) (result []byte, failed bool, err error) {
	if name == runTool {
		argv, err := runArgv(args)
		if err != nil {
			return nil, false, err
		}
		return callRun(x, argv)
	}
	if !slices.Contains(tools.Names, name) {
		return nil, false, fmt.Errorf("%s is not a built-in tool", name)
	}
	var out, stderr bytes.Buffer
	o, err := x(append([]string{"cordon", tools.Arg, name}, expect...), true, args, func(rd io.Reader) { io.Copy(&out, rd) }, func(rd io.Reader) { io.Copy(&stderr, rd) })
	if err != nil {
		return nil, false, fmt.Errorf("%w%s", err, indentStderr(stderr.Bytes()))
	}
	switch {
	case o.Status == outcome.OK:
		return out.Bytes(), false, nil
	case o.Status == outcome.ExitNonzero && o.ExitCode == 1:
		return out.Bytes(), true, nil // the tool failed; its result says why
	}
	return nil, false, fmt.Errorf("%s%s", o.Summary(), indentStderr(stderr.Bytes()))
}

// toolExec runs one command of a built-in tool in a sandbox: args are
// cordon's own (selfExec) or a command of the sandbox's, stdin its input
// (nil: none); stdout and stderr read what it writes, until it ends.
type toolExec func(args []string, selfExec bool, stdin []byte, stdout, stderr func(io.Reader)) (outcome.Outcome, error)

// oneShot runs each command in a sandbox of its own, built from p.
func (r *probeRunner) oneShot(p *profile.Profile) toolExec {
	return func(args []string, selfExec bool, stdin []byte, stdout, stderr func(io.Reader)) (outcome.Outcome, error) {
		var in *os.File
		if stdin != nil {
			// The input reaches the command through a pipe: never on the
			// disk, nor in its command line.
			rd, w, err := os.Pipe()
			if err != nil {
				return outcome.Outcome{}, err
			}
			defer rd.Close()
			go func() {
				w.Write(stdin)
				w.Close()
			}()
			in = rd
		}
		return r.sandboxIn(p, args, selfExec, in, stdout, stderr, nil)
	}
}

// oneShotRefused refuses the tools whose writes a one-shot sandbox of a
// reviewed workspace would drop (its layer is gone with it): in a review
// profile, a call that may write runs in a session's sandbox, whose
// changes are kept when the session ends.
func oneShotRefused(p *profile.Profile, tool string) error {
	if p.Workspace.Reviewed() && !p.Workspace.Guarded() && (tool == runTool || tool == "write_file") {
		return fmt.Errorf("%s: the profile reviews the workspace, and this call has no session whose sandbox keeps its changes (cordon mcp runs each session's calls in one sandbox; cordon run --review runs a command)", tool)
	}
	return nil
}

// runArgv reads the run tool's arguments.
func runArgv(args []byte) ([]string, error) {
	var a struct {
		Argv []string `json:"argv"`
	}
	if err := tools.DecodeStrict(args, &a); err != nil || len(a.Argv) == 0 {
		return nil, fmt.Errorf(`call: run takes {"argv": ["CMD", "ARG", ...]}`)
	}
	return a.Argv, nil
}

// indentStderr appends what a tool wrote to its stderr to an error.
func indentStderr(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	return ": " + string(b)
}

// runTool is the built-in tool that runs a command in a sandbox built from
// the profile, as cordon run does, and returns its output and outcome.
const runTool = "run"

// runResult is what the run tool returns: the output the agent reads,
// cut at what the tool keeps, and the outcome.
type runResult struct {
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated,omitempty"`
	StderrTruncated bool            `json:"stderr_truncated,omitempty"`
	Outcome         outcome.Outcome `json:"outcome"`
}

// callRun runs argv through x and returns the result; failed when the
// command did not succeed.
func callRun(x toolExec, argv []string) ([]byte, bool, error) {
	var bufs [2]bytes.Buffer
	var cut [2]bool
	keep := func(i int) func(io.Reader) {
		return func(rd io.Reader) {
			io.Copy(&bufs[i], io.LimitReader(rd, tools.DefaultMaxBytes))
			if m, _ := io.Copy(io.Discard, rd); m > 0 {
				cut[i] = true
			}
		}
	}
	o, err := x(argv, false, nil, keep(0), keep(1))
	if err != nil {
		return nil, false, err
	}
	res := runResult{Outcome: o, StdoutTruncated: cut[0], StderrTruncated: cut[1]}
	res.Stdout = strings.ToValidUTF8(bufs[0].String(), "\uFFFD")
	res.Stderr = strings.ToValidUTF8(bufs[1].String(), "\uFFFD")
	b, _ := json.Marshal(res)
	return append(b, '\n'), o.Status != outcome.OK, nil
}

// toolMain is the hidden subcommand tools.Arg, inside the sandbox.
func toolMain(args []string) int {
	if len(args) == 1 && args[0] == tools.ResolveArg {
		return tools.ResolveMain(os.Stdin, os.Stdout)
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "cordon: usage: "+tools.Arg+" NAME [ARG=DEV:INO:file|new ...] (arguments on stdin)")
		return 2
	}
	return tools.Main(args[0], args[1:], os.Stdin, os.Stdout)
}
