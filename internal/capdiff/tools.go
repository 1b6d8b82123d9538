package capdiff

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// classRank orders consequence classes by what a call can do.
var classRank = map[string]int{"read": 1, "write": 2, "external": 3, "irreversible": 4, "financial": 5, "physical": 6}

// tools compares the tool policies: a tool that becomes callable, a
// graver class, a label a sink now accepts, a label rule or a returned
// label dropped (less is marked, so more may flow), a cap lifted or raised.
func (d *differ) tools(o, n *profile.Profile) {
	for _, name := range n.ToolNames() {
		nt := n.Tools[name]
		ot, had := o.Tools[name]
		field := "tools." + name
		switch {
		case nt.Deny && (!had || ot.Deny):
			continue
		case !had || ot.Deny:
			d.add(Expansion, "tools", field, "", nt.Class, "the tool %s may be called (%s)", name, nt.Class)
			continue
		case nt.Deny:
			d.add(Reduction, "tools", field+".deny", "", "true", "the tool %s is denied", name)
			continue
		}
		if nt.Class != ot.Class {
			k := Reduction
			if classRank[nt.Class] > classRank[ot.Class] {
				k = Expansion
			}
			d.add(k, "tools", field+".class", ot.Class, nt.Class, "the tool %s is %s (was %s)", name, nt.Class, ot.Class)
		}
		d.set("tools", field+".accepts", ot.Accepts, nt.Accepts, name+" accepts the label %s", name+" no longer accepts the label %s")
		d.marks(field+".returns", ot.Returns, nt.Returns, "what "+name+" returns is labelled %s")
		d.marks(field+".labels", ruleKeys(ot.Labels), ruleKeys(nt.Labels), name+" labels by %s")
		d.count("tools", field+".calls", name+" calls per session", ot.Calls, nt.Calls)
		d.marks(field+".constraints", ot.Constraints, nt.Constraints, name+" is constrained by %s")
		if ot.Pin != nt.Pin && nt.Pin != "" {
			d.add(Expansion, "tools", field+".pin", ot.Pin, nt.Pin, "the tool %s is approved with a new description", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(n.Servers)) {
		was, had := o.Servers[name]
		now := serverText(n.Servers[name])
		switch {
		case !had:
			d.add(Expansion, "tools", "servers."+name, "", now, "the tool server %s is fronted", name)
		case serverText(was) != now:
			d.add(Expansion, "tools", "servers."+name, serverText(was), now, "the tool server %s runs differently", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Servers)) {
		if _, ok := n.Servers[name]; !ok {
			d.add(Reduction, "tools", "servers."+name, serverText(o.Servers[name]), "", "the tool server %s is no longer fronted", name)
		}
	}
	for _, name := range o.ToolNames() {
		if _, ok := n.Tools[name]; !ok && !o.Tools[name].Deny {
			d.add(Reduction, "tools", "tools."+name, o.Tools[name].Class, "", "the tool %s is no longer listed", name)
		}
	}
	var os, ns profile.Session
	if o.Session != nil {
		os = *o.Session
	}
	if n.Session != nil {
		ns = *n.Session
	}
	d.count("session", "session.calls", "calls per session", os.Calls, ns.Calls)
	d.count("session", "session.steps", "steps per session", os.Steps, ns.Steps)
	d.count("session", "session.repeats", "failures of one call in a row", os.Repeats, ns.Repeats)
	d.sizes(o, n)
	ow, nw := os.WallTime(), ns.WallTime()
	if ow != nw {
		d.count("session", "session.wall", "session's wall time", int(ow.Seconds()), int(nw.Seconds()))
	}
}

// marks compares labelling: a mark dropped lets more flow (expansion), a
// mark added, less (reduction).
func (d *differ) marks(field string, o, n []string, what string) {
	for _, v := range o {
		if !slices.Contains(n, v) {
			d.add(Expansion, "tools", field, v, "", "no longer: "+what, v)
		}
	}
	for _, v := range n {
		if !slices.Contains(o, v) {
			d.add(Reduction, "tools", field, "", v, what, v)
		}
	}
}

// count compares a cap where 0 is none: lifting or raising it expands.
func (d *differ) count(area, field, what string, o, n int) {
	if o == n {
		return
	}
	show := func(v int) string {
		if v == 0 {
			return "unbounded"
		}
		return fmt.Sprint(v)
	}
	k := Reduction
	if n == 0 || (o != 0 && n > o) {
		k = Expansion
	}
	d.add(k, area, field, show(o), show(n), "the %s are %s (was %s)", what, show(n), show(o))
}

// ruleKeys describes label rules, one string each.
func ruleKeys(rs []profile.LabelRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %q..%q as %s", r.Arg, r.Prefix, r.Suffix, strings.Join(slices.Sorted(slices.Values(r.Labels)), "+")))
	}
	return out
}

// serverText is a server's definition in one line.
func serverText(s profile.Server) string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(s.Command, " ") + " (profile " + s.Profile + ")"
}

// approval compares what needs a person's approval: a tool whose calls no
// longer do, flow violations sent to approval rather than refused, the
// client's user deciding, approvers added or no longer named.
func (d *differ) approval(o, n *profile.Profile) {
	oa, na := o.ApprovalPolicy(), n.ApprovalPolicy()
	for _, name := range n.ToolNames() {
		nt := n.Tools[name]
		if nt.Deny {
			continue
		}
		nu, field := na.Unheld(name, nt.Class)
		ot, had := o.Tools[name]
		ou := true
		if had && !ot.Deny {
			ou, _ = oa.Unheld(name, ot.Class)
		}
		switch {
		case nu && !ou:
			d.add(Expansion, "approval", field, "held", "runs", "calls of %s no longer wait for a person's approval", name)
		case !nu && ou && had:
			d.add(Reduction, "approval", field, "runs", "held", "calls of %s wait for a person's approval", name)
		}
	}
	if na.Flows && !oa.Flows {
		d.add(Expansion, "approval", "approval.flows", "false", "true", "calls a flow rule refused may run once a person approves them")
	}
	if na.Via == "elicitation" && oa.Via != "elicitation" {
		d.add(Expansion, "approval", "approval.via", oa.Via, na.Via, "the agent's client's user may approve calls (elicitation)")
	}
	switch {
	case len(oa.Approvers) > 0 && len(na.Approvers) == 0:
		d.add(Expansion, "approval", "approval.approvers", strings.Join(oa.Approvers, ", "), "", "anyone who reaches the approval store may approve")
	case len(oa.Approvers) == 0 && len(na.Approvers) > 0:
		d.add(Reduction, "approval", "approval.approvers", "", strings.Join(na.Approvers, ", "), "only %s may approve", strings.Join(na.Approvers, ", "))
	case len(oa.Approvers) > 0:
		d.set("approval", "approval.approvers", oa.Approvers, na.Approvers, "%s may approve calls", "%s may no longer approve calls")
	}
}
