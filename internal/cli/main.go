// Package cli is cordon's command line: one file per subcommand, each turning
// flags into calls. Exit statuses: a contained command's own status passes
// through; cordon's own failures (flags, profile, setup) exit with
// ExitCordon, so they are never mistaken for the command's; an unknown or
// missing command or subcommand exits with ExitUsage. The commands, their
// help, shell completion and the manual page come from one command tree
// (commands.go).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
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

// env is what a subcommand needs from the process, so tests can supply it.
type env struct {
	stdin          *os.File
	stdout, stderr io.Writer
	stdoutFile     *os.File
	stderrFile     *os.File
	getenv         func(string) (string, bool)
	cwd            string
	// views holds where the paths of a profile's view lead, resolved once
	// for the command (see inView).
	views map[string]string
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
		return dispatch(e, args)
	}
	cmd, rest := args[0], args[1:]
	// Hidden entry points: cordon re-executes itself as these.
	switch cmd {
	case server.FileArg:
		return server.FileMain(rest)
	case tools.Arg:
		return toolMain(rest)
	case hiddenProbe:
		return probe.Main(rest)
	case hiddenSupervise:
		return superviseCmd(e, rest)
	case hiddenInit:
		initMain()
		return 0
	case hiddenHold:
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "--version":
		fmt.Fprintln(e.stdout, "cordon", version.String())
		return 0
	}
	// The commands, their help and their flags: commands.go.
	return dispatch(e, args)
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
			if pe.Fix != "" {
				fmt.Fprintf(e.stderr, "cordon:   fix: %s\n", termsafe.Text(pe.Fix))
			}
		}
		return ExitCordon
	}
	// An error may quote what a sandbox chose (a file name in a workspace):
	// no control character of it reaches the terminal.
	fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Text(err.Error()))
	return ExitCordon
}

// newFlags makes a flag set that reports errors instead of exiting: -h
// prints its usage, and a flag it does not know, or a value it cannot
// take, is only the error parseFlags returns, for the caller to print.
func newFlags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package writes an error here before it calls Usage, which
	// then knows it was not asked for.
	failed := false
	fs.SetOutput(writerFunc(func(p []byte) (int, error) { failed = true; return len(p), nil }))
	fs.Usage = func() {
		if failed {
			failed = false
			return
		}
		fmt.Fprintf(e.stderr, "usage: cordon %s\n\nflags:\n", synopsis)
		printFlags(e.stderr, fs)
	}
	return fs
}

// writerFunc is a function that is an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// parsed, when set, is given every flag set parseFlags parses; tests only.
var parsed func(*flag.FlagSet)

// parseFlags parses args with fs. An error names the command and where
// its flags are listed, and flags as cordon writes them (--name); a flag
// fs does not know comes with the closest one fs has, when one is close.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if parsed != nil {
		parsed(fs)
	}
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if name, unknown := strings.CutPrefix(msg, "flag provided but not defined: -"); unknown {
		shown := name
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		msg = "unknown flag " + flagName(shown)
		if near := closestFlag(fs, name); near != "" {
			msg += fmt.Sprintf("; did you mean %s?", flagName(near))
		}
	} else {
		// The flag package names a flag with one dash.
		msg = regexp.MustCompile(`(^|[ :])-([A-Za-z][A-Za-z0-9-]+)`).ReplaceAllString(msg, "$1--$2")
	}
	return fmt.Errorf("%s: %s (cordon help %s lists the flags)", fs.Name(), msg, fs.Name())
}

// closestFlag is the flag of fs that name is likely a misspelling of, as
// a profile's misspelt field is matched; "" when none is.
func closestFlag(fs *flag.FlagSet, name string) string {
	if len(name) > 64 {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return profile.Suggest(name, names)
}

// parseAnywhere parses flags that may come before, between or after the
// operands (cordon approve PROFILE --by NAME), and returns the operands;
// after "--" everything is an operand.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := parseFlags(fs, args); err != nil {
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
