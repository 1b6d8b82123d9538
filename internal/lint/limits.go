package lint

import "fmt"

// boundedLimits are the limits every profile must state and bound.
var boundedLimits = []string{"wall", "memory", "pids", "cpus", "cpu_time"}

func init() {
	register(Rule{
		Code: "CL401", Name: "limit-unbounded", Severity: Error,
		Summary: "a resource limit (wall, memory, processes, CPU) is lifted",
		Why:     "without it, a loop, a fork bomb or a leak is stopped by nothing but the host running out",
		Fix:     "set a finite value that fits the agent's task",
		Check: func(c *Context, t *Target, r *Reporter) {
			for _, name := range boundedLimits {
				if q := t.Profile.Resources.Get(name); q.Unlimited {
					r.At(t, "resources."+name, fmt.Sprintf("the %s limit is unlimited", name), "")
				}
			}
		},
	})
	register(Rule{
		Code: "CL402", Name: "limit-unstated", Severity: Warning,
		Summary: "a resource limit (wall, memory, processes, CPU) is not written in the profile",
		Why:     "the built-in default then decides, unseen by whoever reviews the profile, and changes when cordon does",
		Fix:     "write the limit in resources:",
		Check: func(c *Context, t *Target, r *Reporter) {
			if t.Path == "" {
				return // the embedded default states its own
			}
			for _, name := range boundedLimits {
				if !t.Profile.Written("resources." + name) {
					q := t.Profile.Resources.Get(name)
					r.At(t, "resources", fmt.Sprintf("the %s limit is not stated (the default, %s, applies)", name, q), fmt.Sprintf("write resources.%s", name))
				}
			}
		},
	})
}
