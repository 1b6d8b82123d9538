package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// resolveIn resolves paths through x, in the view of a sandbox, where
// `cordon __tool resolve` resolves them as a tool there would open them.
func resolveIn(x toolExec, paths []string) (string, []tools.Resolved, error) {
	res, err := askResolver(x, map[string]any{"paths": paths})
	if err != nil {
		return "", nil, err
	}
	if len(res.Files) != len(paths) || !filepath.IsAbs(res.Workspace) {
		return "", nil, fmt.Errorf("the resolver answered %d files for %d paths, in workspace %q", len(res.Files), len(paths), res.Workspace)
	}
	return res.Workspace, res.Files, nil
}

// reacher says which label rules name a file of the workspace in the view
// of the built-in tools' sandbox for a call (the session's, when sessions
// has one).
func reacher(p *profile.Profile, r *probeRunner, sessions *sessionSandboxes) gateway.Reacher {
	return func(ctx context.Context, q gateway.ReachQuery) (gateway.ReachAnswer, error) {
		ids := make([]tools.ID, len(q.IDs))
		for i, f := range q.IDs {
			ids[i] = tools.ID{Dev: f.Dev, Ino: f.Ino}
		}
		res, err := askResolver(sessions.execFor(ctx, r.oneShot(p)), map[string]any{"paths": []string{}, "reach": q.Rules, "reach_ids": ids, "reach_paths": q.Paths, "reach_roots": q.Roots})
		if err != nil {
			return gateway.ReachAnswer{}, err
		}
		a := gateway.ReachAnswer{Rules: res.Reached, IDs: res.ReachedIDs, Paths: res.ReachedPaths, Complete: res.ReachComplete}
		for _, f := range res.Matched {
			a.Matched = append(a.Matched, gateway.PolicyFile(f))
		}
		return a, nil
	}
}

// askResolver runs `cordon __tool resolve` through x with the request req.
func askResolver(x toolExec, req map[string]any) (*tools.Resolution, error) {
	in, _ := json.Marshal(req)
	var out, stderr bytes.Buffer
	o, err := x([]string{"cordon", tools.Arg, tools.ResolveArg}, true, in,
		func(rd io.Reader) { io.Copy(&out, io.LimitReader(rd, 1<<20)) }, func(rd io.Reader) { io.Copy(&stderr, io.LimitReader(rd, 64<<10)) })
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, indentStderr(stderr.Bytes()))
	}
	if o.Status != outcome.OK {
		return nil, fmt.Errorf("%s%s", o.Summary(), indentStderr(out.Bytes()))
	}
	var res tools.Resolution
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("the resolver's answer: %v", err)
	}
	return &res, nil
}

// resolver resolves the paths of calls for the gateway of p (read from
// file): the built-in tools' in a sandbox of p (the session's, when
// sessions has one for the call), an upstream server's in a sandbox of its
// own profile. A remote server's files are not on this
// host: its paths are only made absolute from the workspace and cleaned,
// as names.
func resolver(e *env, p *profile.Profile, file string, r *probeRunner, sessions *sessionSandboxes, boxes *resolveBoxes) gateway.Resolver {
	return func(ctx context.Context, server string, paths []string) (string, []tools.Resolved, error) {
		x, remote, err := viewOf(ctx, e, p, file, r, sessions, boxes, server)
		if err != nil {
			return "", nil, err
		}
		if remote {
			var out []tools.Resolved
			for _, path := range paths {
				if !filepath.IsAbs(path) {
					path = filepath.Join(e.cwd, path)
				}
				out = append(out, tools.Resolved{File: tools.File{Path: filepath.Clean(path)}})
			}
			return e.cwd, out, nil
		}
		return resolveIn(x, paths)
	}
}

// changer finds the files changed since a time under directories of the
// view of a server's sandbox (see gateway.Changer), as resolver resolves
// paths there.
func changer(e *env, p *profile.Profile, file string, r *probeRunner, sessions *sessionSandboxes, boxes *resolveBoxes) gateway.Changer {
	return func(ctx context.Context, server string, dirs []string, since time.Time, max int) ([]toolpolicy.File, bool, error) {
		x, remote, err := viewOf(ctx, e, p, file, r, sessions, boxes, server)
		if err != nil || remote {
			return nil, false, err
		}
		res, err := askResolver(x, map[string]any{"paths": []string{}, "changed": map[string]any{"dirs": dirs, "since": since.UnixNano(), "max": max}})
		if err != nil {
			return nil, false, err
		}
		var out []toolpolicy.File
		for _, f := range res.Changed {
			out = append(out, gateway.PolicyFile(f))
		}
		return out, res.ChangedComplete, nil
	}
}

// viewOf runs commands in the view of server's sandbox ("" for the
// built-in tools'); remote says the server's files are not on this host.
func viewOf(ctx context.Context, e *env, p *profile.Profile, file string, r *probeRunner, sessions *sessionSandboxes, boxes *resolveBoxes, server string) (x toolExec, remote bool, err error) {
	if server == "" {
		return sessions.execFor(ctx, r.oneShot(p)), false, nil
	}
	srv, ok := p.Servers[server]
	if !ok {
		return nil, false, fmt.Errorf("no server %s", server)
	}
	if srv.Profile == "" {
		return nil, true, nil
	}
	sf := srv.Profile
	if !filepath.IsAbs(sf) {
		dir := e.cwd
		if file != "" {
			dir = filepath.Dir(file)
		}
		sf = filepath.Join(dir, sf)
	}
	sp, err := profile.LoadFile(sf)
	if err != nil {
		return nil, false, fmt.Errorf("servers.%s.profile: %w", server, err)
	}
	// Resolving writes nothing: the workspace is bound read-only, so that
	// no placeholder of a protected name (see cordon run) is made and
	// removed in it, which would change the directories the resolution
	// stamps.
	sp.Workspace.Writable = false
	sp.Workspace.Mode = ""
	if boxes != nil {
		return boxes.exec(ctx, server, sp), false, nil
	}
	return r.oneShot(sp), false, nil
}

// expects are the command-line arguments that hold a built-in tool to the
// files its call was decided on. In a guarded workspace, each call runs
// alone in a sandbox of its own, whose layer is fresh (tools.FreshLayerArg).
func expects(p *profile.Profile, files map[string]toolpolicy.File) []string {
	var out []string
	if p.Workspace.Guarded() && len(files) > 0 {
		out = append(out, tools.FreshLayerArg)
	}
	for arg, f := range files {
		out = append(out, tools.ExpectArg(arg, tools.File{Path: f.Path, Exists: f.Exists, Dev: f.Dev, Ino: f.Ino}))
	}
	return out
}

// viewWorkspace is the workspace of p's sandboxes as they see it.
func viewWorkspace(e *env, p *profile.Profile) string {
	if p.Workspace.Target != "" {
		return p.Workspace.Target
	}
	if p.Workspace.Path == "" {
		return ""
	}
	return workspacePath(e, p)
}
