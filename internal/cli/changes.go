package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// Exit statuses of cordon apply that are not cordon's own failure.
const (
	// ExitHeld: changes wait for a person's approval (or were denied);
	// nothing was applied.
	ExitHeld = 3
	// ExitConflicts: some changes met a host change made since the run
	// started, or are never applied (special files); the rest landed.
	ExitConflicts = 4
)

// changesDir is where change sets wait: in cordon's state directory, which
// no sandbox sees.
func changesDir() string { return filepath.Join(config.StateDir(), "changes") }

// dirFlag registers --dir, where the change sets are.
func dirFlag(fs *flag.FlagSet) *string {
	return fs.String("dir", "", "the change sets' `DIR` (default: $CORDON_STATE_DIR/changes; cordon serve keeps its sandboxes' in STATE/serve/changes)")
}

// changesFlags registers cordon changes' flags.
func changesFlags(fs *flag.FlagSet) (dir *string, asJSON, diff, all *bool) {
	dir = dirFlag(fs)
	asJSON = fs.Bool("json", false, "print JSON")
	diff = fs.Bool("diff", false, "show a unified diff of each change against the host's workspace")
	all = fs.Bool("all", false, "list the change sets of every workspace (default: those of workspaces here: the current directory, a directory holding it, or one under it)")
	return dir, asJSON, diff, all
}

// applyFlags registers cordon apply's flags.
func applyFlags(fs *flag.FlagSet) (wait *time.Duration, asJSON *bool, dir, store, auditLog *string) {
	wait = fs.Duration("wait", 0, "wait up to `DURATION` for a decision on changes that need approval (default: file the request and exit 3)")
	asJSON = fs.Bool("json", false, "print the report as JSON")
	dir = dirFlag(fs)
	store = fs.String("store", "", "the approval store (default: $CORDON_STATE_DIR/approvals; see cordon approvals)")
	auditLog = fs.String("audit-log", "", "record what was applied in `FILE` (default: the configuration's)")
	return wait, asJSON, dir, store, auditLog
}

// discardFlags registers cordon discard's flags.
func discardFlags(fs *flag.FlagSet) (auditLog, dir *string) {
	auditLog = fs.String("audit-log", "", "record the discard in `FILE` (default: the configuration's)")
	return auditLog, dirFlag(fs)
}

func orChanges(dir string) string {
	if dir == "" {
		return changesDir()
	}
	return dir
}

// related reports whether a change set's workspace is dir's: dir itself,
// a directory holding it, or one under it.
func related(workspace, dir string) bool {
	in := func(a, b string) bool { // a is b or under it
		rel, err := filepath.Rel(b, a)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	return in(dir, workspace) || in(workspace, dir)
}

// keepChanges returns the sandbox's Review hook for a run of p: it
// captures the layer into the change set named by the run's id, with the
// profile's review policy beside it.
func keepChanges(e *env, p *profile.Profile, profileFile, run string, started time.Time) func(*os.File) (*outcome.Changes, error) {
	ws := workspacePath(e, p)
	return func(layer *os.File) (*outcome.Changes, error) {
		set, _, out, err := keepSet(p, profileFile, ws, run, started, layer, false)
		if set == nil {
			return out, err
		}
		return &outcome.Changes{Set: run, Entries: len(set.Changes), Bytes: set.Bytes, Digest: set.Digest}, nil
	}
}

// keepSet captures layer, the layer of run (a run of p over the workspace
// ws, started then), as its change set in changesDir, with p's review
// record beside it; link captures it for landing (changes.Limits.Link).
// When the run changed nothing or the capture failed (err), nothing is
// kept, and set is nil and out what the outcome says.
func keepSet(p *profile.Profile, profileFile, ws, run string, started time.Time, layer *os.File, link bool) (set *changes.Set, rv changes.Review, out *outcome.Changes, err error) {
	dir := changesDir()
	lim := changes.Limits{MaxEntries: int(p.Resources.WorkspaceInodes.N) + 16, MaxBytes: p.Resources.WorkspaceSize.N, Link: link}
	set, err = changes.Capture(layer, ws, dir, run, started, lim)
	if err != nil {
		changes.Discard(dir, run)
		return nil, rv, &outcome.Changes{Set: run}, fmt.Errorf("keeping the changes: %w (the host's workspace is untouched)", err)
	}
	if len(set.Changes) == 0 {
		// Nothing to review: no set waits.
		changes.Discard(dir, run)
		return nil, rv, &outcome.Changes{Set: run, Digest: set.Digest}, nil
	}
	rv = changes.ReviewOf(p, profileFile, p.Hash())
	if err := changes.WriteReview(dir, run, rv); err != nil {
		changes.Discard(dir, run)
		return nil, rv, &outcome.Changes{Set: run}, fmt.Errorf("keeping the changes: %w (the host's workspace is untouched)", err)
	}
	return set, rv, nil, nil
}

// openSet loads the change set run of dir, the changes paths select and
// the review policy kept beside it.
func openSet(dir, run string, paths []string) (*changes.Set, []changes.Change, changes.Review, error) {
	set, err := changes.Load(dir, run)
	if err != nil {
		return nil, nil, changes.Review{}, err
	}
	sel, err := set.Select(paths)
	if err != nil {
		return nil, nil, changes.Review{}, err
	}
	rv, err := changes.LoadReview(dir, run)
	return set, sel, rv, err
}

// changesCmd implements `cordon changes [RUN] [PATH...]`: the change sets
// waiting for review, or one of them.
func changesCmd(e *env, args []string) int {
	fs := newFlags(e, "changes", "changes [--json] [--diff] [--all] [RUN [PATH...]]")
	dirF, asJSON, diff, all := changesFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	dir := orChanges(*dirF)
	if len(operands) == 0 {
		sets, broken, err := changes.List(dir)
		if err != nil {
			return fail(e, err)
		}
		for _, b := range broken {
			fmt.Fprintf(e.stderr, "cordon: %s (cordon discard drops it)\n", termsafe.Line(b.Error()))
		}
		elsewhere := 0
		if !*all {
			here := sets[:0]
			for _, s := range sets {
				if related(s.Workspace, e.cwd) {
					here = append(here, s)
				} else {
					elsewhere++
				}
			}
			sets = here
		}
		if *asJSON {
			if sets == nil {
				sets = []*changes.Set{}
			}
			return printJSON(e, sets)
		}
		if elsewhere > 0 {
			defer fmt.Fprintf(e.stderr, "cordon: %d change set(s) of other workspaces not listed: cordon changes --all lists them\n", elsewhere)
		}
		if len(sets) == 0 {
			fmt.Fprintln(e.stdout, "no change sets")
		}
		for _, s := range sets {
			fmt.Fprintf(e.stdout, "%s  %s  %d changes  %s  %s\n", s.Run, s.Captured.Local().Format(time.DateTime), len(s.Changes), setState(s), termsafe.Line(s.Workspace))
		}
		return 0
	}
	run, paths := operands[0], operands[1:]
	set, sel, rv, err := openSet(dir, run, paths)
	if err != nil {
		return fail(e, err)
	}
	held, _ := rv.Held(sel)
	activity := changes.Git(set, dir)
	if *asJSON {
		return printJSON(e, map[string]any{"set": set, "selected": sel, "needs_approval": held, "git": activity})
	}
	if *diff {
		if err := changes.Diff(e.stdout, set, dir, paths); err != nil {
			return fail(e, err)
		}
		return 0
	}
	fmt.Fprintf(e.stdout, "change set %s of %s (%s), digest %s\n", set.Run, termsafe.Line(set.Workspace), setState(set), set.Digest)
	if len(sel) == 0 {
		fmt.Fprintln(e.stdout, "no changes")
	}
	rules := map[string]string{}
	for _, h := range held {
		rules[h.Path] = h.Rule
	}
	for _, c := range sel {
		line := fmt.Sprintf("%s %-7s %s", kindMark(c.Kind), c.Type, termsafe.Line(c.Path))
		if c.Type == "symlink" {
			line += " -> " + termsafe.Line(c.Target)
		}
		if c.Kind == "modified" && c.Mode != c.OldMode && c.OldMode != 0 {
			line += fmt.Sprintf(" (mode %04o -> %04o)", c.OldMode, c.Mode)
		}
		if len(c.Flags) > 0 {
			line += "  [" + strings.Join(c.Flags, ", ") + "]"
		}
		if r := rules[c.Path]; r != "" {
			line += "  needs approval (" + termsafe.Line(r) + ")"
		}
		fmt.Fprintln(e.stdout, line)
		for _, o := range c.Obeys {
			fmt.Fprintln(e.stdout, "    git would obey: "+termsafe.Line(o))
		}
	}
	if len(paths) == 0 {
		printGit(e, activity)
	}
	return 0
}

// printGit shows what a set does to its repositories, as read from its
// objects: new repositories, commits and the files they change, packs,
// refs moved.
func printGit(e *env, a *changes.GitActivity) {
	if a == nil {
		return
	}
	short := func(id string) string {
		if len(id) > 12 {
			return id[:12]
		}
		return id
	}
	for _, r := range a.Repos {
		fmt.Fprintf(e.stdout, "git %s:\n", termsafe.Line(r.Dir))
		if r.New {
			fmt.Fprintln(e.stdout, "  a new repository")
		}
		for _, c := range r.Commits {
			fmt.Fprintf(e.stdout, "  commit %s %s (%s)\n", short(c.Hash), termsafe.Line(c.Subject), termsafe.Line(c.Author))
			for _, f := range c.Files {
				if f.Binary {
					fmt.Fprintf(e.stdout, "      %s (binary, or not read)\n", termsafe.Line(f.Path))
				} else {
					fmt.Fprintf(e.stdout, "      %s +%d -%d\n", termsafe.Line(f.Path), f.Added, f.Removed)
				}
			}
			if c.FilesNote != "" {
				fmt.Fprintf(e.stdout, "      (%s)\n", termsafe.Line(c.FilesNote))
			}
		}
		if r.Packs > 0 {
			fmt.Fprintf(e.stdout, "  %d new pack(s): the commits in them are not shown\n", r.Packs)
		}
		for _, ref := range r.Refs {
			switch {
			case ref.Old == "":
				fmt.Fprintf(e.stdout, "  %s made at %s\n", termsafe.Line(ref.Name), termsafe.Line(short(ref.New)))
			case ref.New == "":
				fmt.Fprintf(e.stdout, "  %s removed (was %s)\n", termsafe.Line(ref.Name), termsafe.Line(short(ref.Old)))
			default:
				fmt.Fprintf(e.stdout, "  %s %s -> %s\n", termsafe.Line(ref.Name), termsafe.Line(short(ref.Old)), termsafe.Line(short(ref.New)))
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(e.stdout, "  (%s)\n", termsafe.Line(n))
		}
	}
}

func kindMark(kind string) string {
	switch kind {
	case "added":
		return "A"
	case "deleted":
		return "D"
	}
	return "M"
}

func setState(s *changes.Set) string {
	switch {
	case len(s.Applied) == 0:
		return "waiting"
	case len(s.Applied) >= len(s.Changes):
		return "applied"
	}
	return fmt.Sprintf("%d of %d applied", len(s.Applied), len(s.Changes))
}

// applyCmd implements `cordon apply RUN [PATH...]`: lands a change set
// (or the named part of it) on the host's workspace, once the changes
// that need a person's approval have it.
func applyCmd(e *env, args []string) int {
	fs := newFlags(e, "apply", "apply [--wait DURATION] [--json] RUN [PATH...]")
	wait, asJSON, dirF, store, auditLog := applyFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if len(operands) == 0 {
		return fail(e, fmt.Errorf("apply: name a change set (cordon changes lists them)"))
	}
	run, paths := operands[0], operands[1:]
	dir := orChanges(*dirF)
	set, sel, rv, err := openSet(dir, run, paths)
	if err != nil {
		return fail(e, err)
	}
	by, err := loginName()
	if err != nil {
		return fail(e, fmt.Errorf("apply: %w (nothing was applied)", err))
	}
	al, err := openAudit(e, *auditLog, nil)
	if err != nil {
		return fail(e, fmt.Errorf("audit log: %w (nothing was applied)", err))
	}
	// Whether approval is needed depends on what is applied; what the
	// request shows, and an approval covers, is every held change of the
	// set, so that approving a part never approves the rest.
	if _, need := rv.Held(sel); need > 0 {
		held, n := rv.Held(set.Changes)
		if *store == "" {
			*store = approvals.DefaultDir()
		}
		st, err := openApprovalStore(*store)
		if err != nil {
			return fail(e, err)
		}
		it, err := changeApproval(st, set, rv, held, n, *wait)
		if err != nil {
			return fail(e, err)
		}
		switch it.State {
		case approvals.Approved, approvals.Running, approvals.Done:
			fmt.Fprintf(e.stderr, "cordon: the changes that need approval were approved by %s (request %s)\n", termsafe.Line(it.By), it.ID)
		case approvals.Pending:
			fmt.Fprintf(e.stderr, "cordon: %d change(s) of %s need approval (%s); nothing was applied. Request %s waits: cordon approvals show %s, then cordon approvals approve %s, and run cordon apply again (or apply --wait)\n",
				n, run, heldSummary(held, n), it.ID, it.ID, it.ID)
			return ExitHeld
		default:
			fmt.Fprintf(e.stderr, "cordon: the changes of %s that need approval were %s by %s (request %s): nothing was applied; apply the rest by naming their paths, or cordon discard %s\n",
				run, it.State, termsafe.Line(it.By), it.ID, run)
			return ExitHeld
		}
	}
	rep, err := changes.Apply(set, dir, paths, changes.ApplyOptions{Owner: changes.WorkspaceOwner(set.Workspace)})
	if rep != nil {
		rec := changes.ApplyRecord(set, rep)
		rec["by"], rec["selected"] = by, changes.BoundedPaths(paths)
		al.log.Add(audit.Event{Sandbox: run, Agent: rv.Agent, Kind: audit.Action, Type: "changes_apply", Data: rec})
		if aerr := al.log.Seal(); aerr != nil {
			fmt.Fprintf(e.stderr, "cordon: audit log: %v (what was applied is not recorded)\n", aerr)
		}
	}
	if err != nil {
		return fail(e, err)
	}
	if *asJSON {
		printJSON(e, rep)
	} else {
		fmt.Fprintf(e.stdout, "applied %d, already there %d, conflicts %d, refused %d\n", len(rep.Applied), len(rep.Already), len(rep.Conflicts), len(rep.Refused))
		for _, c := range rep.Conflicts {
			fmt.Fprintf(e.stdout, "conflict: %s: %s\n", termsafe.Line(c.Path), termsafe.Line(c.Why))
		}
		for _, p := range rep.Refused {
			fmt.Fprintf(e.stdout, "refused: %s\n", termsafe.Line(p))
		}
	}
	if len(rep.Conflicts)+len(rep.Refused) > 0 {
		return ExitConflicts
	}
	return 0
}

func heldSummary(held []changes.Held, n int) string {
	var parts []string
	for i, h := range held {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", n-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %s", termsafe.Line(h.Path), h.Rule))
	}
	return strings.Join(parts, "; ")
}

// changeApproval finds the approval request for the held changes of set
// (the same digest), filing one when there is none, and waits up to wait
// for its decision.
func changeApproval(st *approvals.Store, set *changes.Set, rv changes.Review, held []changes.Held, n int, wait time.Duration) (approvals.Item, error) {
	items, err := st.List()
	if err != nil {
		return approvals.Item{}, err
	}
	var found *approvals.Item
	for i := range items {
		it := &items[i]
		if it.Tool != changes.ApplyTool || it.Session != set.Run {
			continue
		}
		if changes.ApprovalDigest(it.Args) == set.Digest && it.State != approvals.Expired && it.ProfileHash == applyHash(rv) {
			found = it
		}
	}
	if found == nil {
		now := time.Now()
		id, err := st.Add(approvals.Request{
			Expires: now.Add(changes.ApprovalTimeout), Tool: changes.ApplyTool, Args: changes.ApprovalArgs(set, held, n), Class: "changes",
			Reversible: false, Rule: changes.HeldRules(held),
			Reason: fmt.Sprintf("%d change(s) of a reviewed workspace need approval before they land on %s: cordon changes %s --diff shows them", n, set.Workspace, set.Run),
			Agent:  rv.Agent, Profile: rv.Profile, ProfileHash: applyHash(rv), Session: set.Run, Approvers: rv.Approvers,
		})
		if err != nil {
			return approvals.Item{}, err
		}
		it, err := st.Get(id)
		if err != nil {
			return it, err
		}
		found = &it
	}
	if found.State == approvals.Pending && wait > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		it, err := st.Wait(ctx, found.ID, 250*time.Millisecond)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return it, err
		}
		return it, nil
	}
	return *found, nil
}

// applyHash marks a change set's request as one for cordon apply: never
// the profile's own hash, which a tool gateway of that profile would take
// for one of its held calls and claim.
func applyHash(rv changes.Review) string { return "cordon-apply:" + rv.ProfileHash }

// discardCmd implements `cordon discard RUN`: drops a change set.
func discardCmd(e *env, args []string) int {
	fs := newFlags(e, "discard", "discard RUN")
	auditLog, dirF := discardFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if len(operands) != 1 {
		return fail(e, fmt.Errorf("discard: name one change set (cordon changes lists them)"))
	}
	dir, run := orChanges(*dirF), operands[0]
	// A set that cannot be read is discarded all the same, and recorded
	// with the reason.
	set, loadErr := changes.Load(dir, run)
	if loadErr != nil {
		if !changes.ValidRun(run) || !changes.Exists(dir, run) {
			return fail(e, loadErr)
		}
		set = &changes.Set{Run: run}
	}
	by, err := loginName()
	if err != nil {
		return fail(e, fmt.Errorf("discard: %w (nothing was discarded)", err))
	}
	al, err := openAudit(e, *auditLog, nil)
	if err != nil {
		return fail(e, fmt.Errorf("audit log: %w (nothing was discarded)", err))
	}
	rv, _ := changes.LoadReview(dir, run)
	rec := map[string]any{"set": run, "digest": set.Digest, "by": by, "changes": len(set.Changes), "applied_before": len(set.Applied)}
	if loadErr != nil {
		rec["unreadable"] = loadErr.Error()
	}
	if err := al.log.Append(audit.Event{Sandbox: run, Agent: rv.Agent, Kind: audit.Action, Type: "changes_discard", Data: rec}); err != nil {
		return fail(e, fmt.Errorf("audit log: %w (nothing was discarded)", err))
	}
	if err := changes.Discard(dir, run); err != nil {
		return fail(e, err)
	}
	if loadErr != nil {
		fmt.Fprintf(e.stdout, "discarded %s (unreadable)\n", run)
		return 0
	}
	fmt.Fprintf(e.stdout, "discarded %s (%d changes)\n", run, len(set.Changes))
	return 0
}
