package gateway

import (
	"context"
	"slices"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Labels follow the data, not the tool: a label rule names files, and the
// built-in run tool runs a command that can read any file of its view,
// whichever tool the rule was written for. Before a run call runs, the
// gateway asks which of the profile's label rules name a file of the
// workspace as the call's sandbox sees it (Config.Reach); the call's
// result carries the labels of every one that does. When that cannot be
// known, it carries them all.

// Reacher says which of rules name a file of the workspace in the view of
// the built-in tools' sandbox for the call (ctx): their indexes, and
// whether the whole workspace was looked at.
type Reacher func(ctx context.Context, rules []pathglob.Rule) (found []int, complete bool, err error)

// reachRule is a label rule of the profile on a path argument.
type reachRule struct {
	rule   pathglob.Rule
	labels []string
	from   string // the tool whose rule it is
}

// reachRules are the label rules on path arguments of p's tools, with the
// labels the tool run would not carry otherwise.
func reachRules(p *profile.Profile, run string) []reachRule {
	returns := p.Tools[run].Returns
	var out []reachRule
	for _, name := range p.ToolNames() {
		t := p.Tools[name]
		args := p.PathArgs(name)
		for _, r := range t.Labels {
			if !slices.Contains(args, r.Arg) {
				continue
			}
			var ls []string
			for _, l := range r.Labels {
				if !slices.Contains(returns, l) {
					ls = append(ls, l)
				}
			}
			if len(ls) > 0 {
				out = append(out, reachRule{rule: pathglob.Rule{Glob: r.Glob, Prefix: r.Prefix, Suffix: r.Suffix}, labels: ls, from: name})
			}
		}
	}
	if len(out) > 64 {
		out = out[:64] // the resolver's bound; the rest are all-or-nothing below
	}
	return out
}

// reached are the labels a call of the built-in run tool carries by the
// files its view holds (see above); nil for any other call.
func (g *Gateway) reached(ctx context.Context, tool string) []string {
	g.mu.Lock()
	t := g.tools[tool]
	g.mu.Unlock()
	if tool != "run" || t == nil || t.server != "" {
		return nil
	}
	rules := reachRules(g.cfg.Profile, tool)
	if len(rules) == 0 {
		return nil
	}
	all := func() []string {
		var out []string
		for _, r := range rules {
			out = append(out, r.labels...)
		}
		return out
	}
	if g.cfg.Reach == nil {
		return all()
	}
	rs := make([]pathglob.Rule, len(rules))
	for i, r := range rules {
		rs[i] = r.rule
	}
	release, err := g.resolveSlot(ctx)
	if err != nil {
		return all()
	}
	found, _, err := g.cfg.Reach(ctx, rs)
	release()
	if err != nil {
		g.cfg.Logf("which labelled files the run tool can read could not be known (%v): its result carries every label of the profile's rules", err)
		return all()
	}
	var out []string
	for _, i := range found {
		if i >= 0 && i < len(rules) {
			out = append(out, rules[i].labels...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
