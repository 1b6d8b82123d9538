package profile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/egress"
)

// Governance records what governance approved for the profile's agent: who
// owns it, the approved scope in words and as ceilings the profile may not
// exceed, the review interval, and the risks accepted on the record.
type Governance struct {
	Owner string `yaml:"owner" json:"owner"`
	// Scope is the approved scope, in words.
	Scope    string   `yaml:"scope" json:"scope"`
	Ceilings Ceilings `yaml:"ceilings,omitempty" json:"ceilings,omitempty"`
	// ApprovedBy and ApprovedOn (YYYY-MM-DD) state the approval in the
	// profile; `cordon approve` records it, with the profile's hash, in an
	// approval file beside it.
	ApprovedBy string `yaml:"approved_by,omitempty" json:"approved_by,omitempty"`
	ApprovedOn string `yaml:"approved_on,omitempty" json:"approved_on,omitempty"`
	// ReviewEvery is the review interval: "90d", "12w", "720h".
	ReviewEvery string `yaml:"review_every,omitempty" json:"review_every,omitempty"`
	// RequireApproval makes run and probe refuse the profile when its
	// capabilities grew since the approval record.
	RequireApproval bool             `yaml:"require_approval,omitempty" json:"require_approval,omitempty"`
	RiskAcceptances []RiskAcceptance `yaml:"risk_acceptances,omitempty" json:"risk_acceptances,omitempty"`
}

// Ceilings are the most governance approved: every bind must be at or
// below one of Paths (writable ones below Writable), every allowed
// destination covered by Destinations, every limit at most Limits.
type Ceilings struct {
	Paths        []string          `yaml:"paths,omitempty" json:"paths,omitempty"`
	Writable     []string          `yaml:"writable,omitempty" json:"writable,omitempty"`
	Destinations []string          `yaml:"destinations,omitempty" json:"destinations,omitempty"`
	Limits       map[string]string `yaml:"limits,omitempty" json:"limits,omitempty"`
}

// RiskAcceptance records that someone with the authority accepted running
// without a containment layer, and why.
type RiskAcceptance struct {
	Layer      string `yaml:"layer" json:"layer"`
	AcceptedBy string `yaml:"accepted_by" json:"accepted_by"`
	Reason     string `yaml:"reason" json:"reason"`
	On         string `yaml:"on,omitempty" json:"on,omitempty"`
}

// Provider is a model-inference service the agent's system uses, with what
// it guarantees: the part of the system that runs on someone else's
// infrastructure.
type Provider struct {
	Name string `yaml:"name" json:"name"`
	// Endpoints are the destinations the provider is reached at.
	Endpoints []string `yaml:"endpoints" json:"endpoints"`
	// Retention, Region and Isolation state the provider's guarantees:
	// how long it keeps prompts and outputs, where it processes them, how
	// it separates this customer's inference from others'.
	Retention string `yaml:"retention,omitempty" json:"retention,omitempty"`
	Region    string `yaml:"region,omitempty" json:"region,omitempty"`
	Isolation string `yaml:"isolation,omitempty" json:"isolation,omitempty"`
}

// DegradableLayers are the containment layers a run may go without, when
// the host lacks them and someone said so (allow_degraded, --allow-degraded).
var DegradableLayers = []string{"landlock", "seccomp", "cgroup", "idmap"}

// dateLayout is how governance dates are written.
const dateLayout = "2006-01-02"

// ParseDate reads a governance date (YYYY-MM-DD).
func ParseDate(s string) (time.Time, error) {
	t, err := time.Parse(dateLayout, s)
	if err != nil {
		return t, fmt.Errorf("%q is not a date (write YYYY-MM-DD)", s)
	}
	return t, nil
}

// ParseInterval reads a review interval: "90d", "12w", or a Go duration.
func ParseInterval(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(t, suffix); ok {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				return time.Duration(v) * unit, nil
			}
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not an interval (write e.g. 90d, 12w, 720h)", s)
	}
	return d, nil
}

func (p *Profile) validateGovernance(bad func(field, format string, args ...any)) {
	for i, l := range p.AllowDegraded {
		if !slices.Contains(DegradableLayers, l) {
			bad(fmt.Sprintf("allow_degraded[%d]", i), "unknown layer %q (known: %s)", l, strings.Join(DegradableLayers, ", "))
		}
	}
	for i, pr := range p.Providers {
		field := fmt.Sprintf("providers[%d]", i)
		if pr.Name == "" {
			bad(field+".name", "missing: name the provider")
		}
		if len(pr.Endpoints) == 0 {
			bad(field+".endpoints", "missing: list where the provider is reached (host:port)")
		}
		for j, e := range pr.Endpoints {
			if _, err := egress.ParseRule(e, false); err != nil {
				bad(fmt.Sprintf("%s.endpoints[%d]", field, j), "%v", err)
			}
		}
	}
	g := p.Governance
	if g == nil {
		return
	}
	if g.ApprovedOn != "" {
		if _, err := ParseDate(g.ApprovedOn); err != nil {
			bad("governance.approved_on", "%v", err)
		}
	}
	if g.ReviewEvery != "" {
		if _, err := ParseInterval(g.ReviewEvery); err != nil {
			bad("governance.review_every", "%v", err)
		}
	}
	for i, c := range g.Ceilings.Paths {
		if !path.IsAbs(c) {
			bad(fmt.Sprintf("governance.ceilings.paths[%d]", i), "%q must be an absolute path", c)
		}
	}
	for i, c := range g.Ceilings.Writable {
		if !path.IsAbs(c) {
			bad(fmt.Sprintf("governance.ceilings.writable[%d]", i), "%q must be an absolute path", c)
		}
	}
	for i, d := range g.Ceilings.Destinations {
		if _, err := egress.ParseRule(d, false); err != nil {
			bad(fmt.Sprintf("governance.ceilings.destinations[%d]", i), "%v", err)
		}
	}
	for name, v := range g.Ceilings.Limits {
		spec, ok := LimitByName(name)
		if !ok {
			bad("governance.ceilings.limits."+name, "unknown limit %q (known: %s)", name, limitNames())
			continue
		}
		if _, err := parseQuantity(spec, v); err != nil {
			bad("governance.ceilings.limits."+name, "%v", err)
		}
	}
	for i, r := range g.RiskAcceptances {
		field := fmt.Sprintf("governance.risk_acceptances[%d]", i)
		if !slices.Contains(DegradableLayers, r.Layer) {
			bad(field+".layer", "unknown layer %q (known: %s)", r.Layer, strings.Join(DegradableLayers, ", "))
		}
		if r.On != "" {
			if _, err := ParseDate(r.On); err != nil {
				bad(field+".on", "%v", err)
			}
		}
	}
}

// CeilingLimit returns the governance ceiling of a limit, if one is set.
func (g *Governance) CeilingLimit(name string) (Quantity, bool) {
	if g == nil {
		return Quantity{}, false
	}
	v, ok := g.Ceilings.Limits[name]
	if !ok {
		return Quantity{}, false
	}
	spec, _ := LimitByName(name)
	q, err := parseQuantity(spec, v)
	return q, err == nil
}

// Hash is the profile's canonical hash: the SHA-256 of its effective form
// as JSON, without the approval statement (approved_by, approved_on), so
// that recording an approval does not change what was approved.
func (p *Profile) Hash() string {
	c := p.Clone()
	if c.Governance != nil {
		g := *c.Governance
		g.ApprovedBy, g.ApprovedOn = "", ""
		c.Governance = &g
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic("profile: cannot marshal a validated profile: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
