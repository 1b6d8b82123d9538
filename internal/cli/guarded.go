package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/layers"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// layersDir is where the layers of guarded workspaces are kept while their
// sandboxes run: in cordon's state directory, which no sandbox sees, on
// disk, and (where the state directory is on the workspace's file system)
// where a change lands by a rename.
func layersDir() string { return filepath.Join(config.StateDir(), "layers") }

// guardLayer makes the directory of the layer of run, a guarded run of p,
// and sets opts to keep it there and to land its changes when it ends
// (see landChanges). The directory is locked while the run lasts; a layer
// no run holds, left by a cordon that was killed, is removed by the next
// guarded run. release removes the run's layer once the sandbox has ended.
func guardLayer(e *env, p *profile.Profile, profileFile, run string, record func(audit.Event), started time.Time, opts *sandbox.Options) (release func(), err error) {
	if where := visibleIn(e, p, e.cwd, filepath.Join(layersDir(), "layer")); where != "" {
		return nil, fmt.Errorf("cordon's state directory %s, where a guarded workspace's layer is kept, is inside %s, which the sandbox can see: set CORDON_STATE_DIR elsewhere", config.StateDir(), where)
	}
	// The layer's files are the workspace owner's, as the sandbox's
	// writes in direct mode would be: they land by a rename.
	l, err := layers.Make(layersDir(), run, changes.WorkspaceOwner(workspacePath(e, p)))
	if err != nil {
		return nil, fmt.Errorf("guarded workspace: %w", err)
	}
	opts.LayerDir = l.Dir
	opts.Review = landChanges(e, p, profileFile, run, record, started)
	return l.Release, nil
}

// workspacePath is p's workspace, absolute.
func workspacePath(e *env, p *profile.Profile) string {
	ws := p.Workspace.Path
	if !filepath.IsAbs(ws) {
		ws = filepath.Join(e.cwd, ws)
	}
	return filepath.Clean(ws)
}

// landChanges, once a guarded run has ended, captures what its layer holds
// (judged against the host's tree and every set still held, as review
// mode does), lands at once what the review policy does not hold, and
// leaves the rest waiting as the run's change set. What landed is in the
// run's audit record. When the capture fails, nothing lands.
func landChanges(e *env, p *profile.Profile, profileFile, run string, record func(audit.Event), started time.Time) func(*os.File) (*outcome.Changes, error) {
	ws := workspacePath(e, p)
	return func(layer *os.File) (*outcome.Changes, error) {
		set, rv, out, err := keepSet(p, profileFile, ws, run, started, layer, true)
		if set == nil {
			return out, err
		}
		rep, rest, err := changes.Land(set, layer, changesDir(), rv, changes.ApplyOptions{Owner: changes.WorkspaceOwner(ws)})
		if rep != nil {
			rec := changes.ApplyRecord(set, rep)
			rec["by"] = "guarded"
			if rest != nil {
				rec["waiting"], rec["waiting_digest"] = len(rest.Changes), rest.Digest
			}
			record(audit.Event{Sandbox: run, Agent: p.Agent, Kind: audit.Action, Type: "changes_land", Data: rec})
		}
		if err != nil {
			return &outcome.Changes{Set: run}, fmt.Errorf("landing the changes: %w", err)
		}
		c := &outcome.Changes{Set: run, Entries: len(rest.Changes), Bytes: rest.Bytes, Landed: len(rep.Applied) + len(rep.Already), Conflicts: len(rep.Conflicts)}
		if len(rest.Changes) > 0 {
			c.Digest = rest.Digest
		}
		return c, nil
	}
}

// reportLanded says on stderr what a guarded run's changes became, when
// some wait: what landed is the run's ordinary effect.
func reportLanded(e *env, c *outcome.Changes) {
	if c.Entries == 0 {
		return
	}
	why := "the host's tools would run or obey them, or the review policy holds them"
	if c.Conflicts > 0 {
		why = fmt.Sprintf("%d met a change the host made during the run; the others %s", c.Conflicts, why)
	}
	fmt.Fprintf(e.stderr, "cordon: %d change(s) landed; %d wait for review (%s): cordon changes %s (then cordon apply %s, or cordon discard %s)\n",
		c.Landed, c.Entries, why, c.Set, c.Set, c.Set)
}
