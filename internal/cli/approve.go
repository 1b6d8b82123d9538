package cli

import (
	"flag"
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/capdiff"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// approveCmd implements `cordon approve PROFILE --by NAME`: it records that
// NAME approved the profile as it is now, beside it, and says what changed
// since the previous approval.
func approveCmd(e *env, args []string) int {
	fs := newFlags(e, "approve", "approve PROFILE --by NAME")
	by := approveFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if len(operands) != 1 {
		fs.Usage()
		return fail(e, fmt.Errorf("approve: name one profile file"))
	}
	if *by == "" {
		return fail(e, fmt.Errorf("approve: --by NAME is required: an approval says who approved"))
	}
	file := operands[0]
	p, err := profile.LoadFile(file)
	if err != nil {
		return fail(e, err)
	}
	st, err := approval.CheckTrusted(file, p)
	if err != nil {
		return fail(e, err)
	}
	path, r, err := approval.Write(file, p, *by, time.Now())
	if err != nil {
		return fail(e, err)
	}
	fmt.Fprintf(e.stdout, "approved %s (agent %s, sha256 %s) by %s; recorded in %s\n", file, r.Agent, r.ProfileSHA256[:16], r.ApprovedBy, path)
	if st.Record != nil && !st.Current {
		fmt.Fprintf(e.stdout, "changes since the approval by %s on %s:\n", st.Record.ApprovedBy, st.Record.ApprovedAt.Format("2006-01-02"))
		writeChanges(e, st.Changes)
	}
	return 0
}

// writeChanges prints capability changes, expansions marked "+", reductions
// "-".
func writeChanges(e *env, cs []capdiff.Change) {
	for _, c := range cs {
		mark := "-"
		if c.Kind == capdiff.Expansion {
			mark = "+"
		}
		fmt.Fprintf(e.stdout, "  %s %s: %s\n", mark, c.Field, c.Message)
	}
	if len(cs) == 0 {
		fmt.Fprintln(e.stdout, "  no capability changed")
	}
}

// approveFlags registers cordon approve's flags.
func approveFlags(fs *flag.FlagSet) (by *string) {
	return fs.String("by", "", "who approves (required)")
}
