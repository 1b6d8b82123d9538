// Package cli is cordon's command line: one file per subcommand, each turning
// flags into calls. Exit statuses: a contained command's own status passes
// through; cordon's own failures (usage, profile, setup) exit with
// ExitCordon, so they are never mistaken for the command's.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/server"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
	"github.com/cordon-sandbox/cordon/internal/tools"
	"github.com/cordon-sandbox/cordon/internal/version"
)

// hiddenProbe is the subcommand that runs the probes inside the sandbox.
const hiddenProbe = probe.ProbeArg

// Exit statuses of cordon itself.
const (
	// ExitCordon is returned when cordon fails, before or while building the
	// sandbox; the command did not run.
	ExitCordon = 125
)

// Version is cordon's version, as reports (probe, SARIF, the API, MCP)
// carry it: see internal/version for where it comes from and how a
// release sets it.
var Version = version.String()

// env is what a subcommand needs from the process, so tests can supply it.
type env struct {
	stdin          *os.File
	stdout, stderr io.Writer
	stdoutFile     *os.File
	stderrFile     *os.File
	getenv         func(string) (string, bool)
	cwd            string
}

// Main runs cordon with args (without the program name) and returns the exit
// status.
func Main(args []string) int {
	cwd, _ := os.Getwd()
	e := &env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		stdoutFile: os.Stdout, stderrFile: os.Stderr,
		getenv: os.LookupEnv, cwd: cwd,
	}
	if len(args) == 0 {
		usage(e.stderr)
		return ExitCordon
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "run":
		return runCmd(e, rest)
	case "doctor":
		return doctorCmd(e, rest)
	case "probe":
		return probeCmd(e, rest)
	case "lint":
		return lintCmd(e, rest)
	case "diff":
		return diffCmd(e, rest)
	case "approve":
		return approveCmd(e, rest)
	case "audit":
		return auditCmd(e, rest)
	case "replay":
		return replayCmd(e, rest)
	case "call":
		return callCmd(e, rest)
	case "mcp":
		return mcpCmd(e, rest)
	case "approvals":
		return approvalsCmd(e, rest)
	case "changes":
		return changesCmd(e, rest)
	case "apply":
		return applyCmd(e, rest)
	case "discard":
		return discardCmd(e, rest)
	case "serve":
		return serveCmd(e, rest)
	case server.FileArg:
		return server.FileMain(rest)
	case tools.Arg:
		return toolMain(rest)
	case hiddenProbe:
		return probe.Main(rest)
	case hiddenSupervise:
		return superviseCmd(e, rest)
	case "profile":
		err = profileCmd(e, rest)
	case "version", "--version":
		return versionCmd(e, rest)
	case "help", "-h", "-help", "--help":
		usage(e.stdout)
	case hiddenInit:
		initMain()
	case hiddenHold:
		io.Copy(io.Discard, os.Stdin)
	case hiddenCleanup:
		cleanupMain(rest)
	default:
		fmt.Fprintf(e.stderr, "cordon: unknown command %q\n", cmd)
		usage(e.stderr)
		return ExitCordon
	}
	if err != nil {
		return fail(e, err)
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: cordon <command> [flags]

commands:
  run [flags] -- CMD [ARGS...]   run CMD in a least-privilege sandbox
  doctor                         what this host supports and what cordon will do here
  probe [flags]                  run the escape probes in a sandbox built from the profile
  lint [flags] PROFILE|DIR...    find known mistakes in profiles (text, JSON, SARIF)
  diff [--json] OLD NEW          every capability change between two profiles
  approve PROFILE --by NAME      record the approval of a profile beside it
  audit verify|show|keygen       check, read and sign the audit log
  call [flags] TOOL ARGS-JSON    call a built-in tool as the tool gateway does: decided, then run in a sandbox
  mcp [flags]                    serve the profile's tools to an agent over MCP (stdio, or --http ADDR)
  mcp tools [flags]              list the upstream servers' tools with the pins that approve them
  changes [RUN [PATH...]]        the changes a reviewed workspace's runs left (--diff, --json)
  apply RUN [PATH...]            land a change set on the host's workspace, once approved where needed
  discard RUN                    drop a change set
  approvals list|show|approve|deny|serve
                                 the tool calls held for a person's approval: decide them here or on a web page
  serve --config FILE            sandboxes as a service: an HTTP API with tokens per agent, pre-warmed pools
  serve token                    make an API token and the hash the configuration stores
  replay --profile FILE TRACE    decide a recorded sequence of tool calls with the profile's tool policy
  profile show [flags]           print the effective profile
  version [--json]               print the version (--json: module, Go version, commit)

Run 'cordon <command> -h' for the flags of a command.
`)
}

// fail prints err as a cordon error and returns ExitCordon.
func fail(e *env, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var perrs profile.Errors
	if errors.As(err, &perrs) {
		for _, pe := range perrs {
			fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Text(pe.Error()))
		}
		return ExitCordon
	}
	// An error may quote what a sandbox chose (a file name in a workspace):
	// no control character of it reaches the terminal.
	fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Text(err.Error()))
	return ExitCordon
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: cordon %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseAnywhere parses flags that may come before, between or after the
// operands (cordon approve PROFILE --by NAME), and returns the operands;
// after "--" everything is an operand.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return operands, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(operands, rest...), nil
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }
