package profile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/cel"
)

// Approval says which tool calls a person must approve before they run,
// and how the request reaches them. Without the section, calls of the
// classes in DefaultApprovalClasses are held, through the queue, for 15
// minutes.
type Approval struct {
	// Classes are the consequence classes whose calls need approval.
	// Empty means DefaultApprovalClasses; [] cannot be written, so that
	// no profile turns approval off by leaving the list out.
	Classes []string `yaml:"classes,omitempty" json:"classes,omitempty"`
	// Tools override the classes tool by tool.
	Tools map[string]ToolApproval `yaml:"tools,omitempty" json:"tools,omitempty"`
	// Flows sends a call that a flow rule would refuse to approval
	// instead.
	Flows bool `yaml:"flows,omitempty" json:"flows,omitempty"`
	// Via is how a request reaches an approver: "queue" (cordon's store:
	// cordon approvals, or its web page) or "elicitation" (the MCP
	// client asks its user; a client that cannot ask gets an error).
	Via string `yaml:"via,omitempty" json:"via,omitempty"`
	// Timeout is how long a request waits for a decision; undecided, it is
	// denied.
	Timeout string `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Approvers, when given, are the only names whose decisions count.
	Approvers []string `yaml:"approvers,omitempty" json:"approvers,omitempty"`
}

// ToolApproval is one tool's approval rule: Required forces it on or off;
// When (CEL over the arguments) asks for approval only when true.
type ToolApproval struct {
	Required *bool  `yaml:"required,omitempty" json:"required,omitempty"`
	When     string `yaml:"when,omitempty" json:"when,omitempty"`

	when *cel.Program
}

// DefaultApprovalClasses are the classes whose calls cannot be undone.
var DefaultApprovalClasses = []string{"irreversible", "financial", "physical"}

// DefaultApprovalTimeout is how long a request waits without a timeout in
// the profile.
const DefaultApprovalTimeout = 15 * time.Minute

// ApprovalPolicy is the profile's approval section, or the defaults.
func (p *Profile) ApprovalPolicy() *Approval {
	if p.Approval != nil {
		return p.Approval
	}
	return &noApproval
}

// noApproval is the policy of a profile without the section.
var noApproval Approval

// ClassesNeedingApproval are the classes held for approval.
func (a *Approval) ClassesNeedingApproval() []string {
	if len(a.Classes) == 0 {
		return DefaultApprovalClasses
	}
	return a.Classes
}

// TimeoutDuration is how long a request waits.
func (a *Approval) TimeoutDuration() time.Duration {
	if a.Timeout == "" {
		return DefaultApprovalTimeout
	}
	n, _ := parseDuration(a.Timeout)
	return time.Duration(n)
}

// Needs reports whether a call of tool (of class) with args needs approval,
// and the profile field that says so. An argument condition that cannot
// be evaluated asks for approval.
func (a *Approval) Needs(tool, class string, args func() map[string]any) (bool, string) {
	if t, ok := a.Tools[tool]; ok {
		field := "approval.tools." + tool
		if t.Required != nil && !*t.Required {
			return false, field + ".required"
		}
		if t.when != nil {
			if err := t.when.Check(args()); err != nil && cel.IsFalse(err) {
				return false, field + ".when"
			}
			return true, field + ".when"
		}
		if t.Required != nil {
			return true, field + ".required"
		}
	}
	if slices.Contains(a.ClassesNeedingApproval(), class) {
		return true, "approval.classes"
	}
	return false, ""
}

// Unheld reports whether calls of tool (of class) can run with no person
// approving any of them, and the field that makes it so.
func (a *Approval) Unheld(tool, class string) (bool, string) {
	if t, ok := a.Tools[tool]; ok {
		if t.Required != nil {
			return !*t.Required, "approval.tools." + tool + ".required"
		}
		if t.when != nil {
			return false, ""
		}
	}
	return !slices.Contains(a.ClassesNeedingApproval(), class), "approval.classes"
}

// IsApprover reports whether name may decide requests.
func (a *Approval) IsApprover(name string) bool {
	return len(a.Approvers) == 0 || slices.Contains(a.Approvers, name)
}

func (p *Profile) validateApproval(bad func(field, format string, args ...any)) {
	a := p.Approval
	if a == nil {
		return
	}
	for i, c := range a.Classes {
		if !slices.Contains(ToolClasses, c) {
			bad(fmt.Sprintf("approval.classes[%d]", i), "%q is not a class (%s)", c, strings.Join(ToolClasses, ", "))
		}
	}
	switch a.Via {
	case "", "queue", "elicitation":
	default:
		bad("approval.via", "%q is not a way to ask (queue, elicitation)", a.Via)
	}
	if a.Timeout != "" {
		if n, err := parseDuration(a.Timeout); err != nil || n <= 0 {
			bad("approval.timeout", "%q is not a duration (30s, 10m, 2h)", a.Timeout)
		}
	}
	for i, name := range a.Approvers {
		if strings.TrimSpace(name) == "" {
			bad(fmt.Sprintf("approval.approvers[%d]", i), "empty name")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.Tools)) {
		t := a.Tools[name]
		field := "approval.tools." + name
		if _, ok := p.Tools[name]; !ok {
			bad(field, "%s is not a tool of this profile (under tools)", name)
		}
		if t.When != "" {
			prog, err := cel.Compile(t.When)
			if err != nil {
				bad(field+".when", "%v", err)
			}
			t.when = prog
			if t.Required != nil {
				bad(field, "give required or when, not both")
			}
		}
		a.Tools[name] = t
	}
}
