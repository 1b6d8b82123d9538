package lint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// sinks lists the profile's tools that refuse labels they do not accept.
func sinks(p *profile.Profile) []string {
	var out []string
	for _, name := range p.ToolNames() {
		t := p.Tools[name]
		if !t.Deny && (profile.Outward(t.Class) || len(t.Accepts) > 0) {
			out = append(out, name)
		}
	}
	return out
}

func init() {
	register(Rule{
		Code: "CL901", Name: "unlabelled-source", Severity: Warning,
		Summary: "a tool that reads data returns it without a label while the profile has a tool that sends data out",
		Why:     "flow rules follow labels: data read without one can be passed to the sending tool and leave, however sensitive it was",
		Fix:     "label what the tool returns (returns: [untrusted], and labels by path or argument for secrets)",
		Check: func(c *Context, t *Target, r *Reporter) {
			out := sinks(t.Profile)
			if len(out) == 0 {
				return
			}
			for _, name := range t.Profile.ToolNames() {
				tool := t.Profile.Tools[name]
				if tool.Deny || tool.Class != "read" || len(tool.Returns) > 0 || len(tool.Labels) > 0 {
					continue
				}
				r.At(t, "tools."+name, fmt.Sprintf("what %s returns carries no label, so nothing keeps it from %s", name, strings.Join(out, ", ")), "")
			}
		},
	})
	register(Rule{
		Code: "CL902", Name: "sink-accepts-sensitive", Severity: Error,
		Summary: "a tool that sends data out accepts data labelled secret or pii",
		Why:     "once the agent has seen a secret, nothing then stops it from sending the secret away through that tool",
		Fix:     "remove the label from accepts; a task that must send such data needs its own profile, reviewed for it",
		Check: func(c *Context, t *Target, r *Reporter) {
			for _, name := range sinks(t.Profile) {
				for i, l := range t.Profile.Tools[name].Accepts {
					if slices.Contains([]string{"secret", "pii"}, l) {
						r.At(t, fmt.Sprintf("tools.%s.accepts[%d]", name, i), fmt.Sprintf("%s accepts data labelled %s", name, l), "")
					}
				}
			}
		},
	})
}
