package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/version"
)

// manCmd implements `cordon man`: the manual page cordon(1), in roff,
// generated from the command tree.
func manCmd(e *env, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "cordon: man: unexpected %q\n", args[0])
		return ExitUsage
	}
	writeMan(e.stdout)
	return 0
}

// writeMan writes cordon(1). It carries no date, so that the same cordon
// always makes the same page.
func writeMan(w io.Writer) {
	fmt.Fprintf(w, ".TH CORDON 1 \"\" %s \"User Commands\"\n.nh\n", roffQuoted("cordon "+version.String()))
	fmt.Fprint(w, ".SH NAME\ncordon \\- run the commands and tools of AI agents in a least-privilege sandbox\n")
	fmt.Fprint(w, ".SH SYNOPSIS\n.B cordon\n.I command\n.RI [ flags ]\n.RI [ operands ]\n")
	fmt.Fprint(w, ".SH DESCRIPTION\n", roffText("cordon builds a sandbox for each command or tool call of an AI agent from a profile: "+
		"namespaces of its own, only the files the profile binds, seccomp, Landlock, resource limits, and the network "+
		"only through its egress proxy to the destinations the profile allows. It serves tools over MCP under a tool policy, "+
		"holds calls for a person's approval, keeps a signed audit log, and serves sandboxes over an HTTP API."), "\n")
	fmt.Fprint(w, ".PP\n", roffText("Flags are written -name or --name; a flag's value follows it, or -name=value."), "\n")
	fmt.Fprint(w, ".SH COMMANDS\n")
	var walk func(cs []*command)
	walk = func(cs []*command) {
		for _, c := range cs {
			manCommand(w, c)
			walk(c.subs)
		}
	}
	walk(commands)
	fmt.Fprint(w, ".SH EXIT STATUS\n")
	fmt.Fprint(w, roffText("cordon run exits with the contained command's own status. cordon's own failures (a bad flag, "+
		"a profile it cannot read, a sandbox it cannot build) exit 125, so they are never mistaken for the command's. "+
		"An unknown or missing command or subcommand exits 2. Commands that report (doctor, probe, lint, audit verify) "+
		"exit 1 when what they check fails."), "\n")
	fmt.Fprint(w, ".SH ENVIRONMENT\n")
	for _, v := range [][2]string{
		{"CORDON_STATE_DIR", "where cordon keeps its state: change sets, approvals, probe reports."},
		{"CORDON_TOKEN", "the API token cordon run --server presents."},
		{"CORDON_CONFIG", "the configuration file to read instead of the default one."},
	} {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roffText(v[0]), roffText(v[1]))
	}
	fmt.Fprint(w, ".SH SEE ALSO\n")
	fmt.Fprint(w, roffText("cordon help COMMAND; the documents under docs/ in cordon's source: PROFILES.md, SERVER.md, AUDIT.md, REVIEW.md."), "\n")
}

// manCommand writes one command's section: its synopsis, description,
// subcommands and flags.
func manCommand(w io.Writer, c *command) {
	fmt.Fprintf(w, ".SS %s\n", roffQuoted("cordon "+c.synopsis))
	fmt.Fprintf(w, "%s\n", roffText(c.long))
	if len(c.subs) > 0 {
		names := make([]string, len(c.subs))
		for i, s := range c.subs {
			names[i] = s.name
		}
		fmt.Fprintf(w, ".PP\n%s\n", roffText("Subcommands: "+strings.Join(names, ", ")+"."))
	}
	fs := c.flagSet()
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if isBoolFlag(f) {
			fmt.Fprintf(w, ".TP\n.B %s\n", roffText(flagName(f.Name)))
		} else {
			fmt.Fprintf(w, ".TP\n.BI %s %s\n", roffQuoted(flagName(f.Name)+" "), roffQuoted(name))
		}
		// A default that depends on the host (a path under $HOME) is
		// left to cordon help, which is read where it applies.
		if def := f.DefValue; !isBoolFlag(f) && def != "" && def != "0" && def != "0s" && !strings.Contains(def, "/") {
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n", roffText(usage))
	})
}

// roffText escapes text for a roff line: backslashes, hyphens (which roff
// would hyphenate or render as a Unicode hyphen), and a leading dot or
// quote, which would make the line a request.
func roffText(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`, "\n", " ").Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffQuoted is text as one quoted argument of a request.
func roffQuoted(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `\(dq`) + `"`
}
