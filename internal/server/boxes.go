package server

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/layers"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// WorkspaceTarget is where a sandbox's private workspace appears inside.
const WorkspaceTarget = "/workspace"

// Boxes returns the Starter of real sandboxes (sandbox.Start), all started
// from one sealed copy of cordon. An agent whose profile names a relative
// workspace (the default profile's ".") gets a private, empty one per
// sandbox, under dir/sandboxes/ID, seen inside at /workspace unless the
// profile says where, and removed with the sandbox; an absolute workspace
// is shared as the profile says. allow names the layers the operator let
// sandboxes go without (--allow-degraded), joined by each profile's own.
func Boxes(exe *sandbox.Executable, dir string, allow map[string]bool, log io.Writer) Starter {
	return func(a *Agent, loaded *profile.Profile, id string) (Sandbox, error) {
		p := *loaded
		// The agent's caches are named by the profile's agent: the
		// embedded default profile names agent default for every agent
		// that uses it, whose caches must stay apart all the same (a
		// profile file names its own agent: see Agent.load).
		p.Agent = a.Name
		ws := ""
		if p.Workspace.Path != "" && !filepath.IsAbs(p.Workspace.Path) {
			ws = filepath.Join(dir, "sandboxes", id)
			// Only the directory above is private on the host; the
			// workspace itself must be enterable by the sandbox's user
			// when the profile mounts it read-only (a writable one is
			// mapped to that user).
			if err := os.MkdirAll(filepath.Dir(ws), 0o700); err != nil {
				return nil, fmt.Errorf("private workspace: %w", err)
			}
			if err := os.Mkdir(ws, 0o755); err != nil {
				return nil, fmt.Errorf("private workspace: %w", err)
			}
			p.Workspace.Path = ws
			if p.Workspace.Target == "" {
				p.Workspace.Target = WorkspaceTarget
			}
		}
		var layer *layers.Layer
		if p.Workspace.Guarded() {
			// On disk, in the server's state, which no sandbox sees; the
			// workspace owner's, as what lands is (see guarded.go).
			var err error
			if layer, err = layers.Make(filepath.Join(dir, "layers"), id, changes.WorkspaceOwner(p.Workspace.Path)); err != nil {
				if ws != "" {
					os.RemoveAll(ws)
				}
				return nil, fmt.Errorf("guarded workspace: %w", err)
			}
		}
		degraded := map[string]bool{}
		for l := range allow {
			degraded[l] = true
		}
		for _, l := range p.AllowDegraded {
			degraded[l] = true
		}
		opts := sandbox.Options{Profile: &p, Exe: exe, Cwd: dir, AllowDegraded: degraded,
			LookupEnv: os.LookupEnv, Log: prefixed(log, id), ProfileFile: a.ProfileFile, Guard: guarded(a.ProfileFile),
			CacheRoot: filepath.Join(dir, "caches"), JournalDir: JournalDir(dir)}
		if layer != nil {
			opts.LayerDir = layer.Dir
		}
		box, err := sandbox.Start(opts)
		if err != nil {
			layer.Release()
			if ws != "" {
				os.RemoveAll(ws)
			}
			return nil, err
		}
		return &ownedBox{Box: box, workspace: ws, host: filepath.Clean(p.Workspace.Path), layer: layer}, nil
	}
}

// JournalDir is where a server whose state is dir keeps its journal (see
// package journal).
func JournalDir(dir string) string { return filepath.Join(dir, "journal") }

// ownedBox is a sandbox with the private workspace it takes with it.
type ownedBox struct {
	*sandbox.Box
	workspace string
	host      string        // the host directory of its workspace
	layer     *layers.Layer // a guarded workspace's layer; nil otherwise
}

func (b *ownedBox) Close() { b.CloseWith(nil) }

// CloseWith is Close, calling kept with the layer of a reviewed workspace
// once no process of the sandbox runs (see sandbox.Box.CloseWith).
func (b *ownedBox) CloseWith(kept func(layer *os.File)) {
	b.Box.CloseWith(kept)
	b.layer.Release()
	if b.workspace != "" {
		os.RemoveAll(b.workspace)
	}
}

// Workspace is the host directory the sandbox's workspace is over, and
// whether it is the sandbox's private one, removed with it.
func (b *ownedBox) Workspace() (string, bool) { return b.host, b.workspace != "" }

// prefixed writes each message of a sandbox to log, naming the sandbox.
func prefixed(log io.Writer, id string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		for _, line := range strings.Split(strings.TrimSuffix(string(p), "\n"), "\n") {
			fmt.Fprintf(log, "cordon serve: %s: %s\n", id, termsafe.Line(line))
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// guarded are the files a sandbox of the profile at file must not change
// when they are inside a writable part of its view: the profile and its
// approval record.
func guarded(file string) []string {
	if file == "" {
		return nil
	}
	return []string{file, approval.PathFor(file)}
}
