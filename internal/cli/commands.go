package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ExitUsage is cordon's status when it is called wrongly: an unknown
// command or subcommand, or one missing.
const ExitUsage = 2

// command is one command or subcommand of cordon, as the dispatcher, help,
// shell completion and the man page all see it.
type command struct {
	name string
	// synopsis is the usage line after "cordon ".
	synopsis string
	// short is a line for lists of commands; long a paragraph for help.
	short, long string
	// flags registers the command's flags on a flag set (nil: none). The
	// command's run registers them with the same function.
	flags func(*flag.FlagSet)
	// anywhere: flags may follow operands (parseAnywhere); otherwise the
	// first operand ends them (run's CMD keeps its own flags).
	anywhere bool
	// run runs the command with the arguments after its name; nil for a
	// command that is only a group of subcommands.
	run  func(e *env, args []string) int
	subs []*command
}

// commands is cordon's command tree, in the order help lists it.
var commands []*command

func init() {
	commands = []*command{
		{
			name: "run", synopsis: "run [flags] -- CMD [ARGS...]",
			short: "run CMD in a least-privilege sandbox",
			long: "Runs CMD in a sandbox built from the profile (the embedded default profile without --profile): namespaces of its own, " +
				"only the files the profile binds, seccomp, Landlock, resource limits, and the network only through cordon's egress proxy " +
				"to the destinations the profile allows. With the default profile, the workspace is the current directory or, inside a git repository, " +
				"its top, the command starting in the same subdirectory (--workspace . keeps the current directory alone). " +
				"cordon exits with the command's own status; its own failures exit 125. " +
				"With --server, the command runs in a sandbox of cordon serve instead, under the profile the server gives the token's agent.",
			flags: func(fs *flag.FlagSet) { new(runFlags).register(fs) },
			run:   runCmd,
		},
		{
			name: "doctor", synopsis: "doctor [--json]",
			short: "what this host supports and what cordon will do here",
			long: "Reports the kernel features cordon builds sandboxes from (user namespaces, seccomp, Landlock, cgroup delegation, nftables), " +
				"checks them together by building one real sandbox, and says what to change where one is missing. " +
				"Exits 0 when cordon run can contain commands with every layer, 1 otherwise.",
			flags: func(fs *flag.FlagSet) { doctorFlags(fs) },
			run:   doctorCmd,
		},
		{
			name: "probe", synopsis: "probe [flags]",
			short: "run the escape probes in a sandbox built from the profile",
			long: "Runs a battery of escape attempts (files, processes, network, kernel interfaces) inside sandboxes built from the profile " +
				"exactly as cordon run builds them, and reports each probe's status. With --record the report is kept where cordon lint " +
				"looks for it; with --every the battery runs again on a schedule. Exits 0 only when every probe is contained.",
			flags: func(fs *flag.FlagSet) { new(probeFlags).register(fs) },
			run:   probeCmd,
		},
		{
			name: "lint", synopsis: "lint [flags] [PROFILE|DIR...]",
			short: "find known mistakes in profiles (text, JSON, SARIF)",
			long: "Checks profiles (the embedded default without operands; every profile in a DIR) for known mistakes: rules that grant more " +
				"than they seem to, layers left out, probe reports that show a weakness on this host. Findings are printed as text, JSON or SARIF; " +
				"--rules lists the rules.",
			flags:    func(fs *flag.FlagSet) { lintFlags(fs) },
			anywhere: true,
			run:      lintCmd,
		},
		{
			name: "diff", synopsis: "diff [--json] OLD NEW",
			short: "every capability change between two profiles",
			long: "Compares two profiles by what a sandbox built from each may do, not by their text: every path, destination, tool, " +
				"limit or layer that one grants and the other does not, marked as a widening or a narrowing.",
			flags:    func(fs *flag.FlagSet) { diffFlags(fs) },
			anywhere: true,
			run:      diffCmd,
		},
		{
			name: "approve", synopsis: "approve PROFILE --by NAME",
			short: "record the approval of a profile beside it",
			long: "Records that NAME approved the profile as it stands, in a file beside it. A profile with governance.require_approval " +
				"is refused once it grows beyond what was approved; the changes since the previous approval are printed.",
			flags:    func(fs *flag.FlagSet) { approveFlags(fs) },
			anywhere: true,
			run:      approveCmd,
		},
		{
			name: "audit", synopsis: "audit verify|show|keygen",
			short: "check, read and sign the audit log",
			long: "The audit log is a hash chain of what sandboxes did and what was decided about them, with signed checkpoints. " +
				"These subcommands check it, show its events, and make the key that signs it.",
			subs: []*command{
				{
					name: "verify", synopsis: "audit verify [--key PUB] [--log FILE] [FILES...]",
					short: "check the log's hash chain and checkpoint signatures",
					long: "Checks the hash chain of the audit log (the configured one, or FILES) across its rotated files, and the signatures " +
						"of its checkpoints with the public key. Exits 0 when the log is intact, 1 when a record was changed, removed or reordered.",
					flags:    func(fs *flag.FlagSet) { auditVerifyFlags(fs) },
					anywhere: true,
					run:      auditVerify,
				},
				{
					name: "show", synopsis: "audit show [--sandbox ID] [--kind K] [--since T] [--json] [--log FILE]",
					short: "print the log's events, filtered",
					long: "Prints the events of the audit log, one line each or as JSON Lines, filtered by sandbox, kind and time. " +
						"A damaged record is shown as such, never dropped.",
					flags:    func(fs *flag.FlagSet) { auditShowFlags(fs) },
					anywhere: true,
					run:      auditShow,
				},
				{
					name: "keygen", synopsis: "audit keygen [--out FILE]",
					short: "make the key that signs the log's checkpoints",
					long: "Makes an Ed25519 key pair to sign the audit log's checkpoints: the private key in FILE (mode 0600), " +
						"the public key in FILE.pub. An existing key is never replaced.",
					flags:    func(fs *flag.FlagSet) { auditKeygenFlags(fs) },
					anywhere: true,
					run:      auditKeygen,
				},
			},
		},
		{
			name: "call", synopsis: "call [flags] TOOL ARGS-JSON",
			short: "call a built-in tool as the tool gateway does: decided, then run in a sandbox",
			long: "Calls one of cordon's built-in tools with its arguments, a JSON object, as cordon mcp would: the profile's tool policy " +
				"decides the call, then the tool runs in a sandbox built from the profile. The result is printed as JSON.",
			flags:    func(fs *flag.FlagSet) { callFlags(fs, new(profileFlags)) },
			anywhere: true,
			run:      callCmd,
		},
		{
			name: "mcp", synopsis: "mcp [flags]",
			short: "serve the profile's tools to an agent over MCP (stdio, or --http ADDR)",
			long: "Serves the profile's tools, built-in and from upstream MCP servers, to an agent over the Model Context Protocol, " +
				"on stdin and stdout or over streamable HTTP. Each call is decided by the profile's tool policy (allowed, denied, or held " +
				"for a person's approval), runs in a sandbox, and is recorded in the audit log.",
			flags:    func(fs *flag.FlagSet) { new(mcpFlags).register(fs) },
			anywhere: true,
			run:      mcpCmd,
			subs: []*command{
				{
					name: "tools", synopsis: "mcp tools [flags]",
					short: "list the upstream servers' tools with the pins that approve them",
					long: "Starts the profile's upstream MCP servers once and lists their tools with the pin (a hash of the definition) " +
						"that approves each in the profile. --save keeps the definitions; --diff shows what changed since a pin was taken.",
					flags:    func(fs *flag.FlagSet) { new(mcpFlags).register(fs) },
					anywhere: true,
					run:      func(e *env, args []string) int { return mcpCmd(e, append([]string{"tools"}, args...)) },
				},
			},
		},
		{
			name: "changes", synopsis: "changes [--json] [--diff] [RUN [PATH...]]",
			short: "the changes a reviewed workspace's runs left (--diff, --json)",
			long: "Lists the change sets that runs with a reviewed workspace (--review, workspace.mode: review) left, or the changes of one " +
				"RUN (limited to PATHs), each marked as needing approval or not; --diff shows them against the host's workspace.",
			flags:    func(fs *flag.FlagSet) { changesFlags(fs) },
			anywhere: true,
			run:      changesCmd,
		},
		{
			name: "apply", synopsis: "apply [--wait DURATION] [--json] RUN [PATH...]",
			short: "land a change set on the host's workspace, once approved where needed",
			long: "Applies the change set of RUN (or the named PATHs of it) to the host's workspace. Changes that need a person's approval " +
				"are filed as a request; apply exits 3 until it is decided, or waits for the decision with --wait.",
			flags:    func(fs *flag.FlagSet) { applyFlags(fs) },
			anywhere: true,
			run:      applyCmd,
		},
		{
			name: "discard", synopsis: "discard RUN",
			short: "drop a change set",
			long:  "Drops the change set of RUN without applying any of it, and records the discard in the audit log.",
			flags: func(fs *flag.FlagSet) { discardFlags(fs) }, anywhere: true,
			run: discardCmd,
		},
		{
			name: "approvals", synopsis: "approvals list|show|approve|deny|serve",
			short: "the tool calls held for a person's approval: decide them here or on a web page",
			long: "Tool calls the profile's policy holds for approval wait in the approval store until a person decides them, " +
				"here or on the web page of approvals serve. Every decision is recorded in the audit log in the name of who made it.",
			subs: []*command{
				approvalsSub("list", "approvals list [--all] [--json] [--store DIR]", "list the pending requests (--all: decided ones too)",
					"Lists the requests waiting for a decision, with the tool, its arguments, the agent and the rule that held it; --all lists decided ones too."),
				approvalsSub("show", "approvals show [--json] [--store DIR] ID", "show one request in full",
					"Shows one request in full: the call, who asked, why it was held, and its decision if it has one."),
				approvalsSub("approve", "approvals approve [--reason TEXT] [--session] [--store DIR] ID", "approve a request",
					"Approves the request in the name of the user running the command; with --session, identical calls of the agent's session are approved too."),
				approvalsSub("deny", "approvals deny [--reason TEXT] [--store DIR] ID", "deny a request",
					"Denies the request in the name of the user running the command; the agent's call fails with the reason."),
				approvalsSub("serve", "approvals serve [--http ADDR] [--store DIR]", "decide requests on a web page",
					"Serves a web page on a loopback address where the approvers the configuration names sign in with their tokens and decide requests."),
			},
		},
		{
			name: "cache", synopsis: "cache list|clear",
			short: "each agent's build and package caches, kept between its runs",
			long: "A profile's caches (caches: auto in the default profile) are directories of cordon's state, the agent's own, bound read-write into each of its sandboxes: " +
				"Go's build and module caches, npm's, yarn's, pip's, uv's and cargo's. They are never the host's. resources.cache_size bounds an agent's caches together; " +
				"past it, the run is ended (cache_size_limit) and the least recently used are cleared.",
			subs: []*command{
				cacheSub("list", "cache list [--json] [--state DIR] [--agent NAME]", "list each agent's caches, their size and when last used",
					"Lists each agent's caches with the bytes and files they hold and when a run last used them."),
				cacheSub("clear", "cache clear [--json] [--state DIR] [--agent NAME] [CACHE...]", "empty caches (all of them, or those named)",
					"Empties the caches named (go, npm, yarn, pip, uv, cargo), or all of them, of every agent or of --agent's. "+
						"A sandbox still running keeps the cache it was given until it ends; the next one starts empty."),
			},
		},
		{
			name: "serve", synopsis: "serve --config FILE [flags]",
			short: "sandboxes as a service: an HTTP API with tokens per agent, pre-warmed pools",
			long: "Serves sandboxes over an HTTP API: each agent of the configuration has its tokens and its profile, sandboxes are " +
				"taken from pre-warmed pools, commands and files go through the API, and every action is in the audit log.",
			flags: func(fs *flag.FlagSet) { new(serveFlags).register(fs) },
			run:   serveCmd,
			subs: []*command{
				{
					name: "token", synopsis: "serve token",
					short: "make an API token and the hash the configuration stores",
					long: "Prints a new random API token and its SHA-256. Give the token to its holder once; " +
						"the configuration stores only the hash.",
					run: func(e *env, args []string) int { return serveCmd(e, append([]string{"token"}, args...)) },
				},
			},
		},
		{
			name: "replay", synopsis: "replay [--json] --profile FILE TRACE.jsonl",
			short: "decide a recorded sequence of tool calls with the profile's tool policy",
			long: "Reads a trace of tool calls, one JSON object a line, and prints what the profile's tool policy decides for each, " +
				"in order, as cordon mcp would have: to check a policy against real sessions before using it.",
			flags:    func(fs *flag.FlagSet) { replayFlags(fs) },
			anywhere: true,
			run:      replayCmd,
		},
		{
			name: "profile", synopsis: "profile show [flags] [-- CMD]",
			short: "print the effective profile",
			long:  "Shows a profile as cordon reads it.",
			subs: []*command{
				{
					name: "show", synopsis: "profile show [flags] [-- CMD]",
					short: "print the effective profile",
					long: "Prints the profile a sandbox would be built from, the command-line adjustments applied, as YAML that loads again; " +
						"with -- CMD, also the toolchains CMD would be given.",
					flags: func(fs *flag.FlagSet) { new(profileFlags).register(fs) },
					run: func(e *env, args []string) int {
						if err := profileCmd(e, append([]string{"show"}, args...)); err != nil {
							return fail(e, err)
						}
						return 0
					},
				},
			},
		},
		{
			name: "completion", synopsis: "completion bash|zsh|fish",
			short: "print a shell completion script",
			long: "Prints a script that completes cordon's commands, subcommands and flags, and file names where a flag takes a file " +
				"or directory. Load it from the shell's start-up file, for example: source <(cordon completion bash).",
			subs: []*command{
				completionSub("bash", "Prints the completion script for bash; load it with: source <(cordon completion bash)."),
				completionSub("zsh", "Prints the completion script for zsh; load it with: source <(cordon completion zsh), after compinit."),
				completionSub("fish", "Prints the completion script for fish; load it with: cordon completion fish | source."),
			},
		},
		{
			name: "man", synopsis: "man",
			short: "print the manual page, cordon(1), as roff",
			long:  "Prints cordon's manual page in roff, generated from the same definitions as this help: read it with cordon man | man -l -.",
			run:   manCmd,
		},
		{
			name: "version", synopsis: "version [--json]",
			short: "print the version",
			long:  "Prints cordon's version: the release's, the module version go install recorded, or the commit it was built from; with --json also the module path, Go version, commit, its time and whether the tree had uncommitted changes.",
			flags: func(fs *flag.FlagSet) { versionFlags(fs) },
			run:   versionCmd,
		},
		{
			name: "help", synopsis: "help [COMMAND [SUBCOMMAND]]",
			short: "print the help of a command",
			long:  "Prints the usage, description, subcommands and flags of COMMAND (or SUBCOMMAND of it); without one, the list of commands.",
			run:   helpCmd,
		},
	}
}

// approvalsSub is a subcommand of cordon approvals; they share one flag set.
func approvalsSub(name, synopsis, short, long string) *command {
	return &command{
		name: name, synopsis: synopsis, short: short, long: long,
		flags:    func(fs *flag.FlagSet) { new(approvalsFlags).register(fs) },
		anywhere: true,
		run:      func(e *env, args []string) int { return approvalsCmd(e, append([]string{name}, args...)) },
	}
}

// cacheSub is cordon cache SUB.
func cacheSub(name, synopsis, short, long string) *command {
	return &command{
		name: name, synopsis: synopsis, short: short, long: long,
		flags:    func(fs *flag.FlagSet) { new(cacheFlags).register(fs) },
		anywhere: true,
		run:      func(e *env, args []string) int { return cacheCmd(e, name, args) },
	}
}

// completionSub is cordon completion SHELL.
func completionSub(shell, long string) *command {
	return &command{
		name: shell, synopsis: "completion " + shell,
		short: "the completion script for " + shell, long: long,
		run: func(e *env, args []string) int { return completionCmd(e, shell, args) },
	}
}

// find returns the subcommand of c called name, or nil.
func (c *command) find(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// names lists the names of cs, for messages.
func names(cs []*command) string {
	var n []string
	for _, c := range cs {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
}

// flagSet returns the command's flags, registered on a set that is only
// described, never parsed for a run.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.synopsis, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if c.flags != nil {
		c.flags(fs)
	}
	return fs
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// wantsHelp reports whether args ask c for help: -h, -help or --help where
// the command's own parsing would read a flag.
func (c *command) wantsHelp(args []string) bool {
	if len(args) > 0 && isHelp(args[0]) {
		return true
	}
	fs := c.flagSet()
	var err error
	if c.anywhere {
		_, err = parseAnywhere(fs, args)
	} else {
		err = fs.Parse(args)
	}
	return errors.Is(err, flag.ErrHelp)
}

// dispatch runs the command args name: a command, its subcommands, or help.
func dispatch(e *env, args []string) int {
	root := &command{name: "cordon", subs: commands}
	c, path := root, []string{}
	for {
		if c.run != nil && len(args) > 0 && c.wantsHelp(args) && (len(c.subs) == 0 || c.find(args[0]) == nil) {
			writeHelp(e.stdout, c)
			return 0
		}
		if len(c.subs) == 0 {
			return c.run(e, args)
		}
		if len(args) == 0 {
			if c.run != nil {
				return c.run(e, args)
			}
			writeHelp(e.stderr, c)
			return ExitUsage
		}
		if isHelp(args[0]) {
			writeHelp(e.stdout, c)
			return 0
		}
		sub := c.find(args[0])
		if sub == nil {
			if c.run != nil && strings.HasPrefix(args[0], "-") {
				return c.run(e, args)
			}
			fmt.Fprintf(e.stderr, "cordon: %s %q (valid: %s)\n", unknown(path), args[0], names(c.subs))
			fmt.Fprintf(e.stderr, "Run '%s' for usage.\n", strings.Join(append([]string{"cordon", "help"}, path...), " "))
			return ExitUsage
		}
		c, path, args = sub, append(path, sub.name), args[1:]
	}
}

// unknown names what was not found under the command path: "unknown
// command", "audit: unknown subcommand".
func unknown(path []string) string {
	if len(path) == 0 {
		return "unknown command"
	}
	return strings.Join(path, " ") + ": unknown subcommand"
}

// helpCmd implements `cordon help [COMMAND [SUBCOMMAND]]`.
func helpCmd(e *env, args []string) int {
	c := &command{name: "cordon", subs: commands}
	for i, name := range args {
		sub := c.find(name)
		if sub == nil {
			fmt.Fprintf(e.stderr, "cordon: help: %s %q (valid: %s)\n", unknown(args[:i]), name, names(c.subs))
			return ExitUsage
		}
		c = sub
	}
	writeHelp(e.stdout, c)
	return 0
}

// writeHelp prints c's usage, description, subcommands and flags; for the
// root, the list of commands.
func writeHelp(w io.Writer, c *command) {
	if c.synopsis == "" {
		usage(w)
		return
	}
	fmt.Fprintf(w, "usage: cordon %s\n", c.synopsis)
	for _, s := range c.subs {
		if s.synopsis != c.synopsis {
			fmt.Fprintf(w, "       cordon %s\n", s.synopsis)
		}
	}
	fmt.Fprintf(w, "\n%s\n", wrap(c.long, 78))
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nsubcommands:\n")
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %-10s %s\n", s.name, s.short)
		}
	}
	if fs := c.flagSet(); hasFlags(fs) {
		fmt.Fprintf(w, "\nflags:\n")
		printFlags(w, fs)
	}
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nRun 'cordon help %s SUBCOMMAND' for the help of a subcommand.\n", strings.Fields(c.synopsis)[0])
	}
}

// usage prints the list of commands.
func usage(w io.Writer) {
	fmt.Fprint(w, "usage: cordon <command> [flags]\n\ncommands:\n")
	line := func(synopsis, short string) {
		if len(synopsis) > 30 {
			fmt.Fprintf(w, "  %s\n  %-30s %s\n", synopsis, "", short)
			return
		}
		fmt.Fprintf(w, "  %-30s %s\n", synopsis, short)
	}
	for _, c := range commands {
		line(c.synopsis, c.short)
		if c.run != nil {
			for _, s := range c.subs {
				line(s.synopsis, s.short)
			}
		}
	}
	fmt.Fprint(w, "\nRun 'cordon help COMMAND' or 'cordon COMMAND -h' for the help of a command.\n")
}

// printFlags lists the flags of fs as flag.PrintDefaults does, written as
// the documentation writes them: --name, -v.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  " + flagName(f.Name)
		if name != "" {
			line += " " + name
		}
		if def := f.DefValue; !isBoolFlag(f) && def != "" && def != "0" && def != "0s" {
			usage += fmt.Sprintf(" (default %q)", def)
		}
		fmt.Fprintf(w, "%s\n%s\n", line, indent(wrap(usage, 70), "      "))
	})
}

// indent puts prefix before each line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
