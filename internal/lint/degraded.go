package lint

import (
	"fmt"
	"strings"
)

func init() {
	register(Rule{
		Code: "CL601", Name: "degraded-without-acceptance", Severity: Error,
		Summary: "the profile lets a containment layer be left out without a recorded risk acceptance",
		Why:     "containment weakened for convenience or speed, without anyone with the authority deciding it, is how sandboxes erode",
		Fix:     "record who accepted the risk and why (governance.risk_acceptances), or remove the layer from allow_degraded",
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			for i, layer := range p.AllowDegraded {
				ok := false
				if p.Governance != nil {
					for _, a := range p.Governance.RiskAcceptances {
						if a.Layer == layer && strings.TrimSpace(a.AcceptedBy) != "" && strings.TrimSpace(a.Reason) != "" {
							ok = true
						}
					}
				}
				if !ok {
					r.At(t, fmt.Sprintf("allow_degraded[%d]", i), fmt.Sprintf("the sandbox may run without %s, and no risk acceptance names who accepted that and why", layer), "")
				}
			}
		},
	})
}
