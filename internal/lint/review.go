package lint

import (
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

func init() {
	register(Rule{
		Code: "CL503", Name: "review-overdue", Severity: Warning,
		Summary: "the profile's review interval has passed since its last approval, or it was never approved",
		Why:     "the agent's tools, scope and host move on; a boundary reviewed once protects a system that no longer exists",
		Fix:     "review the profile against the agent's current scope and approve it again (cordon approve)",
		Check: func(c *Context, t *Target, r *Reporter) {
			g := t.Profile.Governance
			if g == nil || g.ReviewEvery == "" {
				return
			}
			every, err := profile.ParseInterval(g.ReviewEvery)
			if err != nil {
				return
			}
			last, by := lastApproval(t)
			if last.IsZero() {
				r.At(t, "governance.review_every", fmt.Sprintf("a review every %s is asked for, and no approval is recorded", g.ReviewEvery), "")
				return
			}
			if due := last.Add(every); c.Now.After(due) {
				r.At(t, "governance.review_every", fmt.Sprintf("last approved by %s on %s; the review was due on %s", by, last.Format("2006-01-02"), due.Format("2006-01-02")), "")
			}
		},
	})
}

// lastApproval is when the profile was last approved and by whom: the
// approval record, else the profile's own statement.
func lastApproval(t *Target) (time.Time, string) {
	if rec := t.Approval.Record; rec != nil {
		return rec.ApprovedAt, rec.ApprovedBy
	}
	if g := t.Profile.Governance; g != nil && g.ApprovedOn != "" {
		if d, err := profile.ParseDate(g.ApprovedOn); err == nil {
			return d, g.ApprovedBy
		}
	}
	return time.Time{}, ""
}
