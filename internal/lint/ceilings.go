package lint

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

func init() {
	register(Rule{
		Code: "CL501", Name: "beyond-ceiling", Severity: Error,
		Summary: "the profile grants more than governance.ceilings approve: a path, a write, a destination or a limit",
		Why:     "a boundary wider than the approved scope quietly overrides the governance decision",
		Fix:     "narrow the profile to the ceilings, or have the ceilings reviewed and raised",
		// Each ceiling governs when it is given: paths (writes too, when
		// writable is given), destinations, each named limit.
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			g := p.Governance
			if g == nil {
				return
			}
			ce := g.Ceilings
			if len(ce.Paths) > 0 || len(ce.Writable) > 0 {
				for i, m := range p.Mounts {
					field := fmt.Sprintf("mounts[%d]", i)
					if !under(m.Path, ce.Paths) && !under(m.Path, ce.Writable) {
						r.At(t, field+".path", fmt.Sprintf("%s is outside the ceiling paths (%s)", m.Path, strings.Join(ce.Paths, ", ")), "")
					} else if m.Writable && !under(m.Path, ce.Writable) {
						r.At(t, field+".writable", fmt.Sprintf("%s is writable; the ceiling admits writing only %s", m.Path, orNothing(ce.Writable)), "")
					}
				}
				if ws := p.Workspace; path.IsAbs(ws.Path) {
					if !under(ws.Path, ce.Paths) && !under(ws.Path, ce.Writable) {
						r.At(t, "workspace.path", fmt.Sprintf("the workspace %s is outside the ceiling paths", ws.Path), "")
					} else if ws.Writable && !under(ws.Path, ce.Writable) {
						r.At(t, "workspace.writable", fmt.Sprintf("the workspace %s is writable; the ceiling admits writing only %s", ws.Path, orNothing(ce.Writable)), "")
					}
				}
			}
			if len(ce.Destinations) > 0 {
				for i, a := range p.Network.Allow {
					if !coveredBy(a.Dest, ce.Destinations) {
						r.At(t, fmt.Sprintf("network.allow[%d].dest", i), fmt.Sprintf("%s is beyond the ceiling destinations (%s)", a.Dest, orNothing(ce.Destinations)), "")
					}
				}
			}
			for _, l := range profile.Limits {
				max, ok := g.CeilingLimit(l.Name)
				if !ok || max.Unlimited {
					continue
				}
				if q := p.Resources.Get(l.Name); q.Unlimited || q.N > max.N {
					r.At(t, "resources."+l.Name, fmt.Sprintf("the %s limit %s is above its ceiling %s", l.Name, q, max), "")
				}
			}
		},
	})
}

func orNothing(xs []string) string {
	if len(xs) == 0 {
		return "nothing"
	}
	return strings.Join(xs, ", ")
}

// under reports whether host path p is at or below one of roots.
func under(p string, roots []string) bool {
	p = path.Clean(p)
	return slices.ContainsFunc(roots, func(root string) bool {
		root = path.Clean(root)
		return p == root || root == "/" || strings.HasPrefix(p, root+"/")
	})
}

// coveredBy reports whether the allow rule dest is within one of the
// ceiling destinations: the same host or address range or a narrower one,
// on ports the ceiling names.
func coveredBy(dest string, ceilings []string) bool {
	a, err := egress.ParseRule(dest, false)
	if err != nil {
		return false
	}
	for _, text := range ceilings {
		c, err := egress.ParseRule(text, false)
		if err != nil {
			continue
		}
		if !portsWithin(a.Ports, c.Ports) {
			continue
		}
		switch {
		case c.Prefix.IsValid():
			if a.Prefix.IsValid() && a.Prefix.Bits() >= c.Prefix.Bits() && c.Prefix.Contains(a.Prefix.Addr()) {
				return true
			}
		case a.Host == c.Host:
			return true
		default:
			if suffix, ok := strings.CutPrefix(c.Host, "*."); ok && a.Host != "" && strings.HasSuffix(strings.TrimPrefix(a.Host, "*."), "."+suffix) {
				return true
			}
		}
	}
	return false
}

func portsWithin(a, c []uint16) bool {
	if c == nil {
		return true
	}
	if a == nil {
		return false
	}
	for _, p := range a {
		if !slices.Contains(c, p) {
			return false
		}
	}
	return true
}
