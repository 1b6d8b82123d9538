package lint

import "strings"

func init() {
	register(Rule{
		Code: "CL504", Name: "governance-missing", Severity: Warning,
		Summary: "the profile has no governance block, or it names no owner or approved scope",
		Why:     "a boundary has to match the scope governance approved for the agent; without a record of that scope nobody can tell whether it does",
		Fix:     "add governance: with owner, scope (in words), ceilings and review_every",
		Check: func(c *Context, t *Target, r *Reporter) {
			g := t.Profile.Governance
			switch {
			case g == nil:
				r.At(t, "agent", "no governance block: no owner, approved scope or review interval is recorded", "")
			case strings.TrimSpace(g.Owner) == "":
				r.At(t, "governance", "the governance block names no owner", "")
			case strings.TrimSpace(g.Scope) == "":
				r.At(t, "governance", "the governance block states no approved scope", "")
			}
		},
	})
}
