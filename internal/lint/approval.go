package lint

import (
	"fmt"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/capdiff"
)

func init() {
	register(Rule{
		Code: "CL502", Name: "changed-since-approval", Severity: Error,
		Summary: "the profile differs from its approval record, or requires approval and has none",
		Why:     "a profile that grew after review carries capabilities nobody approved",
		Fix:     "review the changes (cordon diff), then record the approval: cordon approve PROFILE --by NAME",
		Check: func(c *Context, t *Target, r *Reporter) {
			if t.ApprovalErr != nil {
				r.At(t, "governance", "the approval record cannot be read: "+t.ApprovalErr.Error(), "")
				return
			}
			st := t.Approval
			g := t.Profile.Governance
			if st.Record == nil {
				if g != nil && g.RequireApproval {
					r.At(t, "governance.require_approval", fmt.Sprintf("approval is required and none is recorded (%s)", approval.PathFor(t.Path)), "")
				}
				return
			}
			if st.Current {
				return
			}
			var parts []string
			for _, ch := range st.Changes {
				mark := "-"
				if ch.Kind == capdiff.Expansion {
					mark = "+"
				}
				parts = append(parts, mark+" "+ch.Message)
			}
			what := "no capability changed, but the profile did"
			if len(parts) > 0 {
				what = strings.Join(parts, "; ")
			}
			field := "governance"
			if len(st.Changes) > 0 {
				field = st.Changes[0].Field
			}
			sev := Warning
			if capdiff.Expanded(st.Changes) {
				sev = Error
			}
			r.Severe(t, sev, field, fmt.Sprintf("changed since %s approved it on %s: %s", st.Record.ApprovedBy, st.Record.ApprovedAt.Format("2006-01-02"), what), "")
		},
	})
}
