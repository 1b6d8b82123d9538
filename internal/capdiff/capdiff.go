// Package capdiff compares what two profiles let an agent do: every change
// of a capability (host paths and their access, the workspace, toolchains
// bound from the host, environment passed in, network destinations, limits
// and budgets, degraded layers, governance ceilings) classified as an
// expansion or a reduction. It is pure: profiles in, changes out.
package capdiff

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Kind says which way a capability moved.
type Kind string

// Kinds of change.
const (
	Expansion Kind = "expansion"
	Reduction Kind = "reduction"
)

// Change is one capability that differs.
type Change struct {
	Kind Kind `json:"kind"`
	// Area is what kind of capability: paths, workspace, env, network,
	// limits, budget, degraded, governance.
	Area string `json:"area"`
	// Field is the profile field, e.g. "network.allow".
	Field   string `json:"field"`
	Old     string `json:"old,omitempty"`
	New     string `json:"new,omitempty"`
	Message string `json:"message"`
}

// Expanded reports whether any change is an expansion.
func Expanded(cs []Change) bool {
	return slices.ContainsFunc(cs, func(c Change) bool { return c.Kind == Expansion })
}

// Expansions returns the expansions among cs.
func Expansions(cs []Change) []Change {
	var out []Change
	for _, c := range cs {
		if c.Kind == Expansion {
			out = append(out, c)
		}
	}
	return out
}

// differ collects changes.
type differ struct{ out []Change }

func (d *differ) add(k Kind, area, field, old, new, format string, args ...any) {
	d.out = append(d.out, Change{Kind: k, Area: area, Field: field, Old: old, New: new, Message: fmt.Sprintf(format, args...)})
}

// Diff lists the capability changes from old to new, in a stable order.
func Diff(old, new *profile.Profile) []Change {
	d := &differ{}
	d.workspace(old.Workspace, new.Workspace)
	d.set("workspace", "workspace.unprotect", old.Workspace.Unprotect, new.Workspace.Unprotect, "the protected path %s is writable inside", "the protected path %s is read-only inside again")
	if o, n := old.Workspace.AllowSensitive, new.Workspace.AllowSensitive; o != n {
		k, msg := Expansion, "a home directory or one holding credentials at any depth may be the workspace or bound writable"
		if o {
			k, msg = Reduction, "a home directory or one holding credentials is refused as a writable bind again"
		}
		d.add(k, "workspace", "workspace.allow_sensitive", fmt.Sprint(o), fmt.Sprint(n), "%s", msg)
	}
	d.mounts(old.Mounts, new.Mounts)
	d.toolchains(old.Toolchains, new.Toolchains)
	d.caches(old.Caches, new.Caches)
	d.set("env", "env.pass", old.Env.Pass, new.Env.Pass, "the host variable %s is passed in", "the host variable %s is no longer passed in")
	d.network(&old.Network, &new.Network)
	d.limits(&old.Resources, &new.Resources)
	d.set("degraded", "allow_degraded", old.AllowDegraded, new.AllowDegraded, "may run without %s", "no longer runs without %s")
	d.governance(old.Governance, new.Governance)
	d.tools(old, new)
	d.approval(old, new)
	return d.out
}

func (d *differ) workspace(o, n profile.Workspace) {
	switch {
	case o.Path == "" && n.Path != "":
		d.add(Expansion, "workspace", "workspace.path", "", n.Path, "the workspace %s is bound (%s)", n.Path, access(n.Writable))
		return
	case o.Path != "" && n.Path == "":
		d.add(Reduction, "workspace", "workspace.path", o.Path, "", "no workspace is bound (was %s)", o.Path)
		return
	case o.Path == "":
		return
	}
	if o.Path != n.Path {
		d.add(Expansion, "workspace", "workspace.path", o.Path, n.Path, "the workspace is %s (was %s)", n.Path, o.Path)
	}
	if o.Writable != n.Writable {
		k := Reduction
		if n.Writable {
			k = Expansion
		}
		d.add(k, "workspace", "workspace.writable", access(o.Writable), access(n.Writable), "the workspace is %s (was %s)", access(n.Writable), access(o.Writable))
	}
}

func access(writable bool) string {
	if writable {
		return "read-write"
	}
	return "read-only"
}

// mounts compares binds by where they appear inside.
func (d *differ) mounts(o, n []profile.Mount) {
	old := map[string]profile.Mount{}
	for _, m := range o {
		old[m.Dest()] = m
	}
	seen := map[string]bool{}
	for _, m := range n {
		dest := m.Dest()
		seen[dest] = true
		was, ok := old[dest]
		switch {
		case !ok:
			d.add(Expansion, "paths", "mounts", "", m.String(), "binds %s", m)
		case was.Path != m.Path:
			d.add(Expansion, "paths", "mounts", was.String(), m.String(), "binds %s (was %s)", m, was)
		case was.Writable != m.Writable:
			k := Reduction
			if m.Writable {
				k = Expansion
			}
			d.add(k, "paths", "mounts", access(was.Writable), access(m.Writable), "%s is %s (was %s)", dest, access(m.Writable), access(was.Writable))
		}
	}
	for _, m := range o {
		if !seen[m.Dest()] {
			d.add(Reduction, "paths", "mounts", m.String(), "", "no longer binds %s", m)
		}
	}
}

// set compares two lists as sets: added items expand, removed ones reduce.
func (d *differ) set(area, field string, o, n []string, added, removed string) {
	for _, v := range n {
		if !slices.Contains(o, v) {
			d.add(Expansion, area, field, "", v, added, v)
		}
	}
	for _, v := range o {
		if !slices.Contains(n, v) {
			d.add(Reduction, area, field, v, "", removed, v)
		}
	}
}

func (d *differ) network(o, n *profile.Network) {
	old := map[string]profile.Destination{}
	for _, a := range o.Allow {
		old[a.Dest] = a
	}
	for _, a := range n.Allow {
		was, ok := old[a.Dest]
		switch {
		case !ok:
			d.add(Expansion, "network", "network.allow", "", a.Dest, "%s is allowed%s", a.Dest, methods(a.Methods))
		case wider(was.Methods, a.Methods):
			d.add(Expansion, "network", "network.allow", a.Dest+methods(was.Methods), a.Dest+methods(a.Methods), "%s is allowed%s (was%s)", a.Dest, methods(a.Methods), methods(was.Methods))
		case wider(a.Methods, was.Methods):
			d.add(Reduction, "network", "network.allow", a.Dest+methods(was.Methods), a.Dest+methods(a.Methods), "%s is allowed%s (was%s)", a.Dest, methods(a.Methods), methods(was.Methods))
		}
	}
	for _, a := range o.Allow {
		if !slices.ContainsFunc(n.Allow, func(b profile.Destination) bool { return b.Dest == a.Dest }) {
			d.add(Reduction, "network", "network.allow", a.Dest, "", "%s is no longer allowed", a.Dest)
		}
	}
	var od, nd []string
	for _, x := range o.Deny {
		od = append(od, x.Dest)
	}
	for _, x := range n.Deny {
		nd = append(nd, x.Dest)
	}
	// A deny rule added takes reach away.
	d.set("network", "network.deny", nd, od, "%s is no longer denied", "%s is denied")
	if o.Transparent != n.Transparent {
		if n.Transparent {
			d.add(Expansion, "network", "network.transparent", "false", "true", "clients that ignore the proxy variables are carried too (transparent)")
		} else {
			d.add(Reduction, "network", "network.transparent", "true", "false", "only clients that use the proxy get out (not transparent)")
		}
	}
	for _, name := range []string{"bytes_out", "bytes_in", "connections"} {
		d.quantity("budget", "network.budget."+name, name+" budget", budget(o, name), budget(n, name), true)
	}
}

func budget(n *profile.Network, name string) profile.Quantity {
	switch name {
	case "bytes_out":
		return n.Budget.BytesOut
	case "bytes_in":
		return n.Budget.BytesIn
	}
	return n.Budget.Connections
}

func methods(ms []string) string {
	if len(ms) == 0 {
		return ""
	}
	return " (" + strings.Join(ms, ", ") + " only)"
}

// wider reports whether the method list b allows more than a (nil: any).
func wider(a, b []string) bool {
	if len(b) == 0 {
		return len(a) > 0
	}
	if len(a) == 0 {
		return false
	}
	for _, m := range b {
		if !slices.Contains(a, m) {
			return true
		}
	}
	return false
}

func (d *differ) limits(o, n *profile.Resources) {
	for _, l := range profile.Limits {
		d.quantity("limits", "resources."+l.Name, l.Name+" limit", *o.Get(l.Name), *n.Get(l.Name), false)
	}
}

// quantity compares one limit. An unset quantity is unlimited when
// unsetMeansUnlimited (budgets), else it does not occur (limits have
// defaults).
func (d *differ) quantity(area, field, what string, o, n profile.Quantity, unsetMeansUnlimited bool) {
	rank := func(q profile.Quantity) (int64, bool) {
		if q.Unlimited || (unsetMeansUnlimited && !q.Set()) {
			return 0, true
		}
		return q.N, false
	}
	on, ou := rank(o)
	nn, nu := rank(n)
	if ou == nu && on == nn {
		return
	}
	show := func(q profile.Quantity, unlimited bool) string {
		if unlimited {
			return "unlimited"
		}
		return q.String()
	}
	k := Reduction
	if nu || (!ou && nn > on) {
		k = Expansion
	}
	d.add(k, area, field, show(o, ou), show(n, nu), "the %s is %s (was %s)", what, show(n, nu), show(o, ou))
}

func (d *differ) governance(o, n *profile.Governance) {
	var oc, nc profile.Ceilings
	var oreq, nreq bool
	if o != nil {
		oc, oreq = o.Ceilings, o.RequireApproval
	}
	if n != nil {
		nc, nreq = n.Ceilings, n.RequireApproval
	}
	d.set("governance", "governance.ceilings.paths", oc.Paths, nc.Paths, "the ceiling admits %s", "the ceiling no longer admits %s")
	d.set("governance", "governance.ceilings.writable", oc.Writable, nc.Writable, "the ceiling admits writing %s", "the ceiling no longer admits writing %s")
	d.set("governance", "governance.ceilings.destinations", oc.Destinations, nc.Destinations, "the ceiling admits %s", "the ceiling no longer admits %s")
	for _, l := range profile.Limits {
		oq, ook := o.CeilingLimit(l.Name)
		nq, nok := n.CeilingLimit(l.Name)
		if !ook && !nok {
			continue
		}
		if !ook {
			oq = profile.Quantity{Unlimited: true}
		}
		if !nok {
			nq = profile.Quantity{Unlimited: true}
		}
		d.quantity("governance", "governance.ceilings.limits."+l.Name, l.Name+" ceiling", oq, nq, false)
	}
	if oreq && !nreq {
		d.add(Expansion, "governance", "governance.require_approval", "true", "false", "changes no longer need approval")
	} else if !oreq && nreq {
		d.add(Reduction, "governance", "governance.require_approval", "false", "true", "changes need approval")
	}
}
