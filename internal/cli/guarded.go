package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/config"
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
	if where := visibleIn(p, e.cwd, filepath.Join(layersDir(), "layer")); where != "" {
		return nil, fmt.Errorf("cordon's state directory %s, where a guarded workspace's layer is kept, is inside %s, which the sandbox can see: set CORDON_STATE_DIR elsewhere", config.StateDir(), where)
	}
	if err := os.MkdirAll(layersDir(), 0o700); err != nil {
		return nil, fmt.Errorf("guarded workspace: %w", err)
	}
	sweepLayers(layersDir())
	dir := filepath.Join(layersDir(), run)
	// The lock is taken before the directory is made: a layer whose lock
	// no run holds is one a killed cordon left.
	lock, err := os.OpenFile(dir+lockSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("guarded workspace: %w", err)
	}
	err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err == nil {
		// The layer's files are the workspace owner's, as the sandbox's
		// writes in direct mode would be: they land by a rename.
		if own := changes.WorkspaceOwner(workspacePath(e, p)); own != nil {
			err = os.Chown(dir, own[0], own[1])
		}
	}
	release = func() {
		removeLayer(dir)
		os.Remove(dir + lockSuffix)
		lock.Close()
	}
	if err != nil {
		release()
		return nil, fmt.Errorf("guarded workspace: %w", err)
	}
	opts.LayerDir = dir
	opts.Review = landChanges(e, p, profileFile, run, record, started)
	return release, nil
}

// lockSuffix names the lock file beside a layer's directory.
const lockSuffix = ".lock"

// sweepLayers removes the layers in dir that no run holds: those whose
// lock no process holds, or that have none.
func sweepLayers(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		p := filepath.Join(dir, ent.Name())
		layer := strings.TrimSuffix(p, lockSuffix)
		lock, err := os.OpenFile(layer+lockSuffix, os.O_RDWR, 0)
		switch {
		case errors.Is(err, fs.ErrNotExist) && ent.IsDir():
			removeLayer(p)
		case err != nil:
		case unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil:
			removeLayer(layer)
			os.Remove(layer + lockSuffix)
		}
		if lock != nil {
			lock.Close()
		}
	}
}

// removeLayer removes a layer's directory, whatever modes the sandbox left
// on what it made (a directory of mode 000 cannot be emptied otherwise
// without privilege). Links are removed, never followed.
func removeLayer(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		if err != nil && d != nil && d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	os.RemoveAll(dir)
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
