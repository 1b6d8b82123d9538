package cli

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/cordon-sandbox/cordon/internal/version"
)

// versionCmd implements `cordon version [--json]`: the version, and with
// --json what the build recorded (module path, Go version, commit, its time,
// uncommitted changes).
func versionCmd(e *env, args []string) int {
	fs := newFlags(e, "version", "version [--json]")
	asJSON := versionFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return fail(e, err)
	}
	if fs.NArg() > 0 {
		return fail(e, fmt.Errorf("version takes no operands, got %q", fs.Arg(0)))
	}
	in := version.Get()
	if !*asJSON {
		fmt.Fprintln(e.stdout, "cordon", in.Version)
		return 0
	}
	out, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return fail(e, fmt.Errorf("encoding the version: %w", err))
	}
	fmt.Fprintln(e.stdout, string(out))
	return 0
}

// versionFlags registers version's flags.
func versionFlags(fs *flag.FlagSet) (asJSON *bool) {
	return fs.Bool("json", false, "print the version and the build's module, Go version and commit as JSON")
}
