package cli

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/cordon-sandbox/cordon/internal/capdiff"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// diffCmd implements `cordon diff [--json] OLD NEW`: every capability change
// between two profiles, as expansion or reduction. Exit status 1 when
// something expanded, 0 when nothing did.
func diffCmd(e *env, args []string) int {
	fs := newFlags(e, "diff", "diff [--json] OLD NEW")
	asJSON := diffFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if len(operands) != 2 {
		fs.Usage()
		return fail(e, fmt.Errorf("diff: name two profile files, OLD and NEW"))
	}
	var ps [2]*profile.Profile
	for i, f := range operands {
		p, err := profile.LoadFile(f)
		if err != nil {
			return fail(e, err)
		}
		ps[i] = p
	}
	cs := capdiff.Diff(ps[0], ps[1])
	if *asJSON {
		out, _ := json.MarshalIndent(struct {
			Old      string           `json:"old"`
			New      string           `json:"new"`
			Expanded bool             `json:"expanded"`
			Changes  []capdiff.Change `json:"changes"`
		}{operands[0], operands[1], capdiff.Expanded(cs), append([]capdiff.Change{}, cs...)}, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
	} else {
		writeChanges(e, cs)
	}
	if capdiff.Expanded(cs) {
		return 1
	}
	return 0
}

// diffFlags registers cordon diff's flags.
func diffFlags(fs *flag.FlagSet) (asJSON *bool) {
	return fs.Bool("json", false, "print the changes as JSON")
}
