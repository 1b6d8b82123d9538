package lint

import (
	"fmt"
	"slices"
	"strings"
)

// sharedNames are agent names that name no single agent.
var sharedNames = []string{"*", "all", "any", "agents", "common", "default", "generic", "shared", "everyone"}

func init() {
	register(Rule{
		Code: "CL101", Name: "shared-profile", Severity: Error,
		Summary: "one profile, or one set of capabilities, serves more than one agent",
		Why:     "a profile shared by several agents grants each of them what any of them needs, and no review can match it to one agent's approved scope",
		Fix:     "write one profile per agent, each with only what that agent needs",
		Check: func(c *Context, t *Target, r *Reporter) {
			// The embedded default (no file) is cordon's own baseline for
			// whoever runs a command without a profile: shared by design,
			// built into the binary, and granting nothing beyond the
			// workspace, so no agent's needs can accumulate in it.
			if t.Path == "" {
				return
			}
			if slices.Contains(sharedNames, strings.ToLower(t.Profile.Agent)) {
				r.At(t, "agent", fmt.Sprintf("the agent name %q names no single agent", t.Profile.Agent), "name the one agent this profile serves, and give other agents profiles of their own")
			}
		},
		CheckSet: func(c *Context, r *Reporter) {
			// Profiles with the same capabilities for different agents.
			byCaps := map[string][]*Target{}
			for _, t := range c.Targets {
				k := capabilityKey(t)
				byCaps[k] = append(byCaps[k], t)
			}
			for _, ts := range byCaps {
				for _, t := range ts {
					var others []string
					for _, o := range ts {
						if o != t && o.Profile.Agent != t.Profile.Agent {
							others = append(others, fmt.Sprintf("%s (%s)", o.Profile.Agent, o.Path))
						}
					}
					if len(others) > 0 {
						r.At(t, "agent", "the same capabilities serve agent "+t.Profile.Agent+" and "+strings.Join(others, ", "), "")
					}
				}
			}
		},
	})
}

// capabilityKey is the hash of what a profile grants, whatever agent it
// names and however it is governed.
func capabilityKey(t *Target) string {
	p := t.Profile.Clone()
	p.Agent, p.Governance, p.Providers, p.Hostname = "", nil, nil, ""
	return p.Hash()
}
