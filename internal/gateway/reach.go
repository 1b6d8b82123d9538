package gateway

import (
	"context"
	"fmt"
	"slices"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// Labels follow the data, not the tool: a label rule names files, and the
// built-in run tool runs a command that can read any file of its view,
// whichever tool the rule was written for. Before a run call runs, the
// gateway asks which of the profile's label rules name a file of the
// workspace as the call's sandbox sees it (Config.Reach); the call's
// result carries the labels of every one that does. When that cannot be
// known, it carries them all.

// Reacher says which of the query's rules name a file of the workspace
// in the view of the built-in tools' sandbox for the call (ctx), and
// which of its identities a file there has.
type Reacher func(ctx context.Context, q ReachQuery) (ReachAnswer, error)

// ReachQuery is what a Reacher looks for: files named by Rules, and files
// with the identities IDs (labelled by what was written to them, or by a
// rule under the name they had: a rename keeps them).
type ReachQuery struct {
	Rules []pathglob.Rule
	IDs   []toolpolicy.File // Dev and Ino
	// Paths are labelled paths, found when they hold something.
	Paths []string
	// Roots are where to look besides the workspace: the writable mounts.
	Roots []string
}

// ReachAnswer is what a Reacher found: the indexes of the rules and of the
// identities, the files the rules named (their identities carry the
// rules' labels from then on), and whether it looked at everything (when
// not, everything counts as found).
type ReachAnswer struct {
	Rules, IDs, Paths []int
	Matched           []toolpolicy.File
	Complete          bool
}

// reachRule is a label rule of the profile on a path argument.
type reachRule struct {
	rule   pathglob.Rule
	labels []string
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
				out = append(out, reachRule{rule: pathglob.Rule{Glob: r.Glob, Prefix: r.Prefix, Suffix: r.Suffix}, labels: ls})
			}
		}
	}
	return out
}

// reached are the labels a call of the built-in run tool carries by the
// files its view holds (see above), given what the session carries; nil
// for any other call. The files the rules name give their identities the
// rules' labels, kept as a labelled write's are.
func (g *Gateway) reached(ctx context.Context, tool string, carried []string) []string {
	g.mu.Lock()
	t := g.tools[tool]
	files := g.files
	g.mu.Unlock()
	if tool != "run" || t == nil || t.server != "" {
		return nil
	}
	// What the session carries already adds nothing: no need to look for
	// its files.
	adds := func(ls []string) bool {
		for _, l := range ls {
			if !slices.Contains(carried, l) {
				return true
			}
		}
		return false
	}
	var rules []reachRule
	var out []string
	for _, r := range reachRules(g.cfg.Profile, tool) {
		switch {
		case !adds(r.labels):
		case len(rules) == tools.MaxResolve:
			// Past what one look asks for: carried as if found.
			out = append(out, r.labels...)
		default:
			rules = append(rules, r)
		}
	}
	var ids, paths []toolpolicy.FileEntry
	var spilled []string
	if files != nil {
		var entries []toolpolicy.FileEntry
		entries, spilled = files.Entries()
		for _, e := range entries {
			switch {
			case !adds(e.Labels):
			case e.ByID && len(ids) < maxReachIDs:
				ids = append(ids, e)
			case !e.ByID && len(paths) < maxReachIDs:
				paths = append(paths, e)
			}
		}
	}
	if adds(spilled) {
		// Labels every file carries: run reads files.
		out = append(out, spilled...)
	}
	if len(rules) == 0 && len(ids) == 0 && len(paths) == 0 {
		slices.Sort(out)
		return slices.Compact(out)
	}
	all := func() []string {
		out := slices.Clone(out)
		for _, r := range rules {
			out = append(out, r.labels...)
		}
		for _, e := range ids {
			out = append(out, e.Labels...)
		}
		for _, e := range paths {
			out = append(out, e.Labels...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if g.cfg.Reach == nil {
		return all()
	}
	q := ReachQuery{Roots: writableRoots(g.cfg.Profile)[1:]}
	for _, e := range paths {
		q.Paths = append(q.Paths, e.Path)
	}
	for _, r := range rules {
		q.Rules = append(q.Rules, r.rule)
	}
	for _, e := range ids {
		q.IDs = append(q.IDs, toolpolicy.File{Dev: e.Dev, Ino: e.Ino})
	}
	release, err := g.resolveSlot(ctx)
	if err != nil {
		return all()
	}
	a, err := g.cfg.Reach(ctx, q)
	release()
	if err != nil {
		g.cfg.Logf("which labelled files the run tool can read could not be known (%v): its result carries every label they could give", err)
		return all()
	}
	if !a.Complete {
		return all()
	}
	for _, i := range a.Paths {
		if i >= 0 && i < len(paths) {
			out = append(out, paths[i].Labels...)
		}
	}
	for _, i := range a.Rules {
		if i >= 0 && i < len(rules) {
			out = append(out, rules[i].labels...)
		}
	}
	for _, i := range a.IDs {
		if i >= 0 && i < len(ids) {
			out = append(out, ids[i].Labels...)
		}
	}
	if files != nil && len(a.Matched) > 0 {
		// A file a rule names keeps the rule's labels under any name.
		var es []toolpolicy.FileEntry
		for _, f := range a.Matched {
			var ls []string
			for _, r := range rules {
				if pathglob.MatchRule(r.rule, f.Path, g.cfg.Workspace) {
					ls = append(ls, r.labels...)
				}
			}
			if len(ls) > 0 {
				es = append(es, toolpolicy.FileEntry{Dev: f.Dev, Ino: f.Ino, ByID: true, Labels: ls})
			}
		}
		files.Merge(es, nil)
		g.keepLabels()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maxReachIDs bounds the identities looked for: as many as FileLabels
// keeps.
const maxReachIDs = toolpolicy.MaxFiles

// labelRunWrites gives the files a call of the built-in run tool changed,
// while its session carries labels, those labels, as a labelled write's:
// a command that copies what it read (cp .env notes/x) writes it under a
// name no rule names.
func (g *Gateway) labelRunWrites(ctx context.Context, s *session, c toolpolicy.Call) {
	w := walkedOf(ctx)
	if c.Tool != "run" || w == nil || w.started.IsZero() || g.cfg.Changed == nil {
		return
	}
	s.mu.Lock()
	labels := s.policy.Labels()
	s.mu.Unlock()
	if len(labels) == 0 {
		return
	}
	var found []toolpolicy.File
	complete := false
	lctx, done, err := g.lookSlot(ctx)
	if err == nil {
		found, complete, err = g.cfg.Changed(lctx, "", writableRoots(g.cfg.Profile), w.started.Add(-tools.SettleMargin), maxRunChanged)
		done()
	}
	if err != nil || !complete {
		// Fail closed: what cannot be named, every file carries.
		why := "more files than cordon names"
		if err != nil {
			why = err.Error()
		}
		g.cfg.Logf("session %s: which files a run call changed could not all be known (%s): every file read from now on carries the session's labels", s.id, why)
		s.mu.Lock()
		s.policy.SpillLabels()
		s.mu.Unlock()
	}
	if len(found) == 0 {
		return
	}
	n := toolpolicy.Call{Tool: c.Tool, Args: map[string]any{}, Workspace: c.Workspace, Files: map[string]toolpolicy.File{}}
	for i, f := range found {
		n.Files[fmt.Sprintf("changed[%d]", i)] = f
	}
	s.mu.Lock()
	s.policy.LabelCreated(n)
	s.mu.Unlock()
}

// maxRunChanged is how many files a run call may change and each be
// labelled by name: past it, the session's labels are every file's.
const maxRunChanged = 4096

// writableRoots are the places a command of p's sandbox can write that
// outlive it: the workspace and the writable mounts.
func writableRoots(p *profile.Profile) []string {
	roots := []string{"."}
	for _, m := range p.Mounts {
		if m.Writable {
			roots = append(roots, m.Dest())
		}
	}
	return roots
}
