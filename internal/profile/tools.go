package profile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Tool is the profile's policy for one tool the agent may call: what kind
// of consequence it has, which labels what it returns carries into the
// session, which labels may flow into it, and how often it may be called.
// A tool the profile does not list is refused.
type Tool struct {
	// Class is the consequence of a call: read, write, external,
	// irreversible, financial or physical.
	Class string `yaml:"class,omitempty" json:"class,omitempty"`
	// Deny refuses every call, with the profile saying so.
	Deny bool `yaml:"deny,omitempty" json:"deny,omitempty"`
	// Returns are the labels of everything the tool returns.
	Returns []string `yaml:"returns,omitempty" json:"returns,omitempty"`
	// Labels label what a call returns by the value of an argument.
	Labels []LabelRule `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Accepts are the labels that may flow into the tool: a call is refused
	// while the session carries a label not listed here. Only sinks are
	// checked: tools of an outward class (external, irreversible,
	// financial, physical) and any tool that lists what it accepts.
	Accepts []string `yaml:"accepts,omitempty" json:"accepts,omitempty"`
	// Calls caps the calls of the tool in one session; 0 is no cap.
	Calls int `yaml:"calls,omitempty" json:"calls,omitempty"`
}

// LabelRule gives labels to what a call returns when the string argument
// Arg starts with Prefix and ends with Suffix (either may be empty, not
// both).
type LabelRule struct {
	Arg    string   `yaml:"arg" json:"arg"`
	Prefix string   `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	Suffix string   `yaml:"suffix,omitempty" json:"suffix,omitempty"`
	Labels []string `yaml:"labels" json:"labels"`
}

// Session bounds one agent task: calls allowed, steps taken (every call
// the agent makes, refused ones included), wall time, and how many times in
// a row the same call may fail before it is refused as a loop. 0 or empty
// is no bound.
type Session struct {
	Calls   int    `yaml:"calls,omitempty" json:"calls,omitempty"`
	Steps   int    `yaml:"steps,omitempty" json:"steps,omitempty"`
	Wall    string `yaml:"wall,omitempty" json:"wall,omitempty"`
	Repeats int    `yaml:"repeats,omitempty" json:"repeats,omitempty"`
}

// WallTime is the session's wall-time bound, 0 for none. The profile is
// validated: the value parses.
func (s *Session) WallTime() time.Duration {
	if s == nil || s.Wall == "" {
		return 0
	}
	n, _ := parseDuration(s.Wall)
	return time.Duration(n)
}

// Consequence classes of a tool.
var ToolClasses = []string{"read", "write", "external", "irreversible", "financial", "physical"}

// Outward reports whether a class's calls reach beyond the agent's own
// workspace, so that what flows into them leaves.
func Outward(class string) bool {
	switch class {
	case "external", "irreversible", "financial", "physical":
		return true
	}
	return false
}

// BuiltinLabels are the labels every profile knows; Labels adds others.
var BuiltinLabels = []string{"secret", "untrusted", "pii"}

// ToolNames lists the tools of the profile, sorted.
func (p *Profile) ToolNames() []string {
	return slices.Sorted(maps.Keys(p.Tools))
}

// toolName accepts tool and label names: letters, digits, '_' and '-'.
var toolName = nameRule{first: alnum + "_", rest: alnum + "_-", max: 128}

func (p *Profile) validateTools(bad func(field, format string, args ...any)) {
	known := map[string]bool{}
	for _, l := range BuiltinLabels {
		known[l] = true
	}
	for i, l := range p.Labels {
		switch {
		case !toolName.MatchString(l):
			bad(fmt.Sprintf("labels[%d]", i), "%q is not a valid label (letters, digits, '_', '-')", l)
		case known[l]:
			bad(fmt.Sprintf("labels[%d]", i), "%q is already a label", l)
		}
		known[l] = true
	}
	labels := func(field string, ls []string) {
		for i, l := range ls {
			if !known[l] {
				bad(fmt.Sprintf("%s[%d]", field, i), "unknown label %q (known: %s; a profile adds its own under labels)", l, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
			}
		}
	}
	for _, name := range p.ToolNames() {
		t := p.Tools[name]
		field := "tools." + name
		if !toolName.MatchString(name) {
			bad(field, "%q is not a valid tool name", name)
			continue
		}
		if t.Class == "" && !t.Deny {
			bad(field+".class", "missing: say what a call does (%s)", strings.Join(ToolClasses, ", "))
		} else if t.Class != "" && !slices.Contains(ToolClasses, t.Class) {
			bad(field+".class", "%q is not a class (%s)", t.Class, strings.Join(ToolClasses, ", "))
		}
		labels(field+".returns", t.Returns)
		labels(field+".accepts", t.Accepts)
		for i, r := range t.Labels {
			rf := fmt.Sprintf("%s.labels[%d]", field, i)
			if r.Arg == "" {
				bad(rf+".arg", "missing: the argument whose value is matched")
			}
			if r.Prefix == "" && r.Suffix == "" {
				bad(rf, "give a prefix, a suffix or both")
			}
			if len(r.Labels) == 0 {
				bad(rf+".labels", "missing")
			}
			labels(rf+".labels", r.Labels)
		}
		if t.Calls < 0 {
			bad(field+".calls", "%d is negative", t.Calls)
		}
	}
	if s := p.Session; s != nil {
		for _, b := range []struct {
			name string
			n    int
		}{{"calls", s.Calls}, {"steps", s.Steps}, {"repeats", s.Repeats}} {
			if b.n < 0 {
				bad("session."+b.name, "%d is negative", b.n)
			}
		}
		if s.Wall != "" {
			if n, err := parseDuration(s.Wall); err != nil || n <= 0 {
				bad("session.wall", "%q is not a duration (30s, 10m, 2h)", s.Wall)
			}
		}
	}
}

func cloneTools(ts map[string]Tool) map[string]Tool {
	if ts == nil {
		return nil
	}
	out := make(map[string]Tool, len(ts))
	for name, t := range ts {
		t.Returns = slices.Clone(t.Returns)
		t.Accepts = slices.Clone(t.Accepts)
		t.Labels = slices.Clone(t.Labels)
		for i := range t.Labels {
			t.Labels[i].Labels = slices.Clone(t.Labels[i].Labels)
		}
		out[name] = t
	}
	return out
}
