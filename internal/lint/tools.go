package lint

import (
	"fmt"
	"maps"
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

// builtin reports whether name is one of cordon's built-in tools, which
// the sandbox they run in scopes (the view, the writable paths, the
// network allowlist).
func builtin(name string) bool {
	switch name {
	case "run", "read_file", "write_file", "list_files", "fetch":
		return true
	}
	return false
}

func init() {
	register(Rule{
		Code: "CL903", Name: "unscoped-tool", Severity: Warning,
		Summary: "a tool that changes or sends something takes any arguments, as often as the agent likes",
		Why:     "a tool is scoped by what it may be asked to do: without constraints on its arguments or a cap on its calls, one tool of broad reach sets the boundary for the whole agent",
		Fix:     "add constraints over its arguments (constraints: ['args.path.startsWith(\"/workspace/\")']) and a calls cap, or deny it",
		Check: func(c *Context, t *Target, r *Reporter) {
			for _, name := range t.Profile.ToolNames() {
				tool := t.Profile.Tools[name]
				if tool.Deny || tool.Class == "read" || builtin(name) || len(tool.Constraints) > 0 || tool.Calls > 0 {
					continue
				}
				r.At(t, "tools."+name, fmt.Sprintf("%s (%s) has no constraint on its arguments and no cap on its calls", name, tool.Class), "")
			}
		},
	})
	register(Rule{
		Code: "CL904", Name: "irreversible-unapproved", Severity: Error,
		Summary: "an irreversible, financial or physical tool runs with no person approving its calls",
		Why:     "what cannot be undone needs someone with the authority to accept the risk to see it before it happens; isolation does not undo a payment or a deletion",
		Fix:     "keep the class under approval.classes (the default), or hold the tool's calls above a threshold (approval.tools.NAME.when), or deny it",
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			for _, name := range p.ToolNames() {
				tool := p.Tools[name]
				switch tool.Class {
				case "irreversible", "financial", "physical":
					if unheld, field := p.ApprovalPolicy().Unheld(name, tool.Class); unheld && !tool.Deny {
						if p.Approval == nil {
							field = "tools." + name
						}
						r.At(t, field, fmt.Sprintf("%s (%s) runs without approval", name, tool.Class), "")
					}
				}
			}
		},
	})
	register(Rule{
		Code: "CL905", Name: "upstream-undeclared", Severity: Warning,
		Summary: "an upstream server's tool is used without being declared and approved",
		Why:     "the gateway offers an upstream tool only when the profile declares it with a pin of its definition; an undeclared or unpinned tool is withdrawn, and a server with no declared tool is started for nothing",
		Fix:     "run cordon mcp tools, read each description, and declare the tools the agent needs with their class and pin",
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			declared := map[string]bool{}
			for _, name := range p.ToolNames() {
				server, _, ok := p.Upstream(name)
				if !ok {
					continue
				}
				declared[server] = true
				if p.Tools[name].Pin == "" && !p.Tools[name].Deny {
					r.At(t, "tools."+name, fmt.Sprintf("%s has no pin: the gateway withdraws it until its definition is approved", name), "")
				}
			}
			for _, server := range slices.Sorted(maps.Keys(p.Servers)) {
				if !declared[server] {
					r.At(t, "servers."+server, fmt.Sprintf("no tool of %s is declared: the gateway offers none of them", server), "")
				}
			}
		},
	})
}

func init() {
	register(Rule{
		Code: "CL906", Name: "label-reachable-without-it", Severity: Warning,
		Summary: "a label rule names files that another tool can read without carrying the label",
		Why:     "a label rule names files, not one tool's argument: read through another tool that takes paths, the file brings nothing into the session, and the flow rules let it leave",
		Fix:     "give the other tool the same label rule (or returns: [LABEL]), or keep the files out of its view (the built-in run tool needs neither: cordon labels a run call by the files its view holds)",
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			for _, name := range p.ToolNames() {
				tool := p.Tools[name]
				if tool.Deny {
					continue
				}
				for i, rule := range tool.Labels {
					if !slices.Contains(p.PathArgs(name), rule.Arg) {
						continue
					}
					var others []string
					for _, other := range p.ToolNames() {
						if other == name || !readsFiles(p, other) || carries(p, other, rule) {
							continue
						}
						others = append(others, other)
					}
					if len(others) > 0 {
						r.At(t, fmt.Sprintf("tools.%s.labels[%d]", name, i), fmt.Sprintf("the files %s are labelled %s when %s reads them, and these tools can read them without the label: %s", ruleText(rule), strings.Join(rule.Labels, ", "), name, strings.Join(others, ", ")), "")
					}
				}
			}
		},
	})
}

// readsFiles reports whether the tool name reads the files its path
// arguments name (not only their names, as a listing or a search does).
// The built-in run tool is labelled by what its view holds at run time.
func readsFiles(p *profile.Profile, name string) bool {
	t := p.Tools[name]
	if t.Deny {
		return false
	}
	return t.Class == "read" && len(p.PathArgs(name)) > 0 && name != "list_files" && !strings.HasSuffix(name, "__list_directory") && !strings.HasSuffix(name, "__search_files")
}

// carries reports whether the tool name gives what it reads the labels of
// rule: it returns them, or has a rule naming the same files with them.
func carries(p *profile.Profile, name string, rule profile.LabelRule) bool {
	t := p.Tools[name]
	missing := false
	for _, l := range rule.Labels {
		if slices.Contains(t.Returns, l) {
			continue
		}
		same := false
		for _, o := range t.Labels {
			if o.Glob == rule.Glob && o.Prefix == rule.Prefix && o.Suffix == rule.Suffix && slices.Contains(o.Labels, l) && slices.Contains(p.PathArgs(name), o.Arg) {
				same = true
			}
		}
		missing = missing || !same
	}
	return !missing
}

// ruleText is how a label rule names files.
func ruleText(r profile.LabelRule) string {
	var parts []string
	if r.Glob != "" {
		parts = append(parts, r.Glob)
	}
	if r.Prefix != "" {
		parts = append(parts, "starting "+r.Prefix)
	}
	if r.Suffix != "" {
		parts = append(parts, "ending "+r.Suffix)
	}
	return strings.Join(parts, ", ")
}
