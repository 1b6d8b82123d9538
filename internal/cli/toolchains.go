package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// host is what toolchain resolution reads of cordon's environment.
func (e *env) host() toolchain.Host {
	return toolchain.Host{Getenv: e.getenv, Cwd: e.cwd}
}

// runToolchains resolves p's toolchains for a run of argv, warning on
// stderr of each name the profile lists that resolves to nothing here.
func runToolchains(e *env, p *profile.Profile, argv []string) (*toolchain.Plan, error) {
	h := e.host()
	h.Cache = cacheDir(e, p, "prefixes")
	pl, err := toolchain.ResolveRun(p, argv, h)
	if err != nil {
		return nil, err
	}
	for _, w := range pl.Warnings() {
		fmt.Fprintf(e.stderr, "cordon: warning: %s\n", termsafe.Line(w))
	}
	return pl, nil
}

// writeToolchains writes, as YAML comments, how p's toolchains resolve on
// this host for a run of argv (none when it is empty). Paths are the
// host's and a sandbox's choosing: each line is made safe for a terminal
// (termsafe), which also keeps it one comment line.
func writeToolchains(e *env, w io.Writer, p *profile.Profile, argv []string) error {
	if len(p.Toolchains) == 0 {
		return nil
	}
	command := ""
	if len(argv) > 0 {
		command = argv[0]
	}
	pl, err := toolchain.ResolveRun(p, argv, e.host())
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "# toolchains on this host (name: found -> run; bound; PATH):")
	for _, en := range pl.Entries {
		fmt.Fprintf(w, "#   %s\n", termsafe.Line(en.String()))
	}
	if p.Toolchains.HasAuto() && command == "" {
		fmt.Fprintln(w, "#   auto: the command given to cordon run (cordon profile show -- CMD shows it)")
	}
	if pl.Path != "" {
		fmt.Fprintf(w, "# PATH=%s\n", termsafe.Line(pl.Path))
	}
	return nil
}

// doctorCommands are the commands doctor shows the default profile's auto
// toolchain for: those a shell gets, so that what doctor says is what a
// shell finds.
var doctorCommands = toolchain.ShellToolchains

// doctorToolchains resolves, with the default profile, what cordon run
// would bind for a few common commands.
func doctorToolchains(e *env) []toolchain.Entry {
	p := profile.Default()
	var out []toolchain.Entry
	for _, c := range doctorCommands {
		pl, err := toolchain.Resolve(p, c, e.host())
		switch {
		case err != nil:
			out = append(out, toolchain.Entry{Name: c, Auto: true, Missing: "REFUSED: " + err.Error()})
		case len(pl.Entries) > 0:
			out = append(out, pl.Entries[0])
		}
	}
	return out
}

// printToolchains writes doctor's toolchains rows.
func printToolchains(w io.Writer, entries []toolchain.Entry) {
	fmt.Fprintf(w, "  %-18s %s\n", "toolchains", "the default profile binds the toolchain of the command run (toolchains: auto), as your PATH resolves it, and a shell (bash -s, -c, a script) all of these; --toolchain NAME adds others")
	for _, en := range entries {
		fmt.Fprintf(w, "  %-18s cordon run -- %s%s\n", "", termsafe.Line(en.Name), termsafe.Line(resolution(en)))
	}
}

// resolution is an entry's resolution after its name.
func resolution(en toolchain.Entry) string {
	s := en.String()
	return strings.TrimPrefix(strings.TrimPrefix(s, en.Name), " (auto)")
}
