// Package lint finds known design mistakes in profiles before they reach a
// sandbox: a profile shared by agents, network left unscoped, writes and
// secrets beyond the workspace, limits missing, capabilities beyond what
// governance approved or changed since, reviews overdue, layers weakened
// without a recorded risk acceptance, model providers unaccounted for, a
// boundary never probed. Each rule lives in a file of its own and registers
// itself; every finding has a stable code, a severity, the place of the
// offending field and the fix.
package lint

import (
	"sort"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// Severity is how bad a finding is.
type Severity string

// Severities, as SARIF names its levels.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Finding is one mistake, where it is written.
type Finding struct {
	Code     string   `json:"code"`
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	File     string   `json:"file"`
	Line     int      `json:"line,omitempty"`
	Col      int      `json:"column,omitempty"`
	// Field is the profile field at fault, e.g. "network.allow[0].dest".
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Target is one profile under review, with what surrounds it.
type Target struct {
	// Path is the profile's file; empty for the embedded default.
	Path    string
	Profile *profile.Profile
	// Approval is how the profile stands against its approval record;
	// ApprovalErr is set when the record could not be read.
	Approval    approval.Status
	ApprovalErr error
	// Report is the recorded probe report for the profile's current hash,
	// nil when there is none.
	Report *probe.Report
}

// Context is everything the rules look at.
type Context struct {
	Targets []*Target
	Now     time.Time
	// Host fingerprints this host, to tell whether a probe report was made
	// here.
	Host probe.Host
	// Toolchains, when set, is the host the profiles' toolchains are
	// resolved on (see package toolchain).
	Toolchains *toolchain.Host
}

// Rule is one kind of mistake.
type Rule struct {
	Code     string
	Name     string
	Severity Severity
	// Summary says in one line what the rule catches; Why, why it matters;
	// Fix, what to do.
	Summary string
	Why     string
	Fix     string
	// Check looks at one profile; CheckSet, when set, at all of them
	// together (rules about profiles shared between agents).
	Check    func(c *Context, t *Target, r *Reporter)
	CheckSet func(c *Context, r *Reporter)
}

var registry = map[string]Rule{}

// register adds a rule; each rule's file calls it from init.
func register(r Rule) {
	if _, dup := registry[r.Code]; dup {
		panic("lint: duplicate rule code " + r.Code)
	}
	registry[r.Code] = r
}

// Rules returns every rule, by code.
func Rules() []Rule {
	out := make([]Rule, 0, len(registry))
	for _, r := range registry {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Reporter collects the findings of one rule.
type Reporter struct {
	rule *Rule
	out  *[]Finding
}

// At reports a finding on field of t's profile. A fix, when given,
// replaces the rule's general one.
func (r *Reporter) At(t *Target, field, message, fix string) {
	r.add(t, field, message, fix, r.rule.Severity)
}

// Severe reports a finding with the given severity instead of the rule's.
func (r *Reporter) Severe(t *Target, sev Severity, field, message, fix string) {
	r.add(t, field, message, fix, sev)
}

func (r *Reporter) add(t *Target, field, message, fix string, sev Severity) {
	if fix == "" {
		fix = r.rule.Fix
	}
	f := Finding{Code: r.rule.Code, Rule: r.rule.Name, Severity: sev, File: t.Path, Field: field, Message: message, Fix: fix}
	if file, line, col := t.Profile.Locate(field); line > 0 {
		f.File, f.Line, f.Col = file, line, col
	}
	if f.File == "" {
		f.File = profile.DefaultName
	}
	*r.out = append(*r.out, f)
}

// Run applies every rule and returns the findings, by file, line and code.
func Run(c *Context) []Finding {
	var out []Finding
	for _, rule := range Rules() {
		rule := rule
		rep := &Reporter{rule: &rule, out: &out}
		if rule.CheckSet != nil {
			rule.CheckSet(c, rep)
		}
		if rule.Check != nil {
			for _, t := range c.Targets {
				rule.Check(c, t, rep)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Code < b.Code
	})
	return out
}
