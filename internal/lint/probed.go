package lint

import (
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// defaultProbeAge is how old a probe report may be when the profile sets no
// review interval.
const defaultProbeAge = 30 * 24 * time.Hour

func init() {
	register(Rule{
		Code: "CL801", Name: "unprobed", Severity: Warning,
		Summary: "no escape-probe report for the profile as it is now on this host, or one older than the review interval, partial, from another kernel, or with probes that escaped",
		Why:     "a boundary tested once and then assumed drifts with every kernel, host and profile change",
		Fix:     "run cordon probe --record --profile PROFILE on this host, and on a schedule",
		Check: func(c *Context, t *Target, r *Reporter) {
			rep := t.Report
			if rep == nil {
				r.At(t, "agent", "no probe report recorded for this profile's current hash on this host", "")
				return
			}
			maxAge := defaultProbeAge
			if g := t.Profile.Governance; g != nil && g.ReviewEvery != "" {
				if d, err := profile.ParseInterval(g.ReviewEvery); err == nil {
					maxAge = d
				}
			}
			switch h := rep.Host; {
			case rep.Only != "":
				r.At(t, "agent", fmt.Sprintf("the recorded probe report covers only the %s probes", rep.Only), "")
			case rep.Summary.Escaped > 0 || rep.Summary.Error > 0:
				r.Severe(t, Error, "agent", fmt.Sprintf("the probe report of %s has %d escaped and %d error", rep.Time.Format("2006-01-02"), rep.Summary.Escaped, rep.Summary.Error), "fix what escaped, then probe again")
			case h.Kernel != c.Host.Kernel || h.LandlockABI != c.Host.LandlockABI || h.Cgroup != c.Host.Cgroup || h.Root != c.Host.Root:
				r.At(t, "agent", fmt.Sprintf("the probe report was made on another setup (kernel %s, Landlock ABI %d, cgroup %s, root %t)", h.Kernel, h.LandlockABI, h.Cgroup, h.Root), "")
			case c.Now.Sub(rep.Time) > maxAge:
				r.At(t, "agent", fmt.Sprintf("the probe report is from %s, older than %s", rep.Time.Format("2006-01-02"), maxAge), "")
			}
		},
	})
}
