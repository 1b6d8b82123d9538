package gateway

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/tools"
)

// A tool server is sent the resolved paths a call was decided on, and
// walks them again itself, by name, when it acts: whoever can change a
// name on the way in between (another sandbox sharing the workspace, a
// process of the host) can make it act on another file than the one
// decided. The server's view (derived from the profile, see ServerView)
// bounds what it could reach then; these checks find out when it did:
//
//   - a call that waited for approval is resolved again before it runs,
//     and refused when a path names another file than the one approved;
//   - after the call, its paths are resolved again: a path that names
//     another file, or whose directories changed meanwhile (tools.File's
//     stamp), may have been walked to a file no decision saw. The result
//     is withheld, the event recorded, and a write gives the labels the
//     session carries to the file the path names now as well; a write
//     is also held to the files it was sent (othersWritten).
//
// Such a refusal counts for the loop and probing rules when a path named
// another file (walked.named), not when a directory or another file
// merely changed: anything writing in the workspace does that.

// ruleFiles is the rule of a call refused because a path it named changed.
const ruleFiles = "files"

// walked is what enforce and runUpstream share of one call's files.
type walked struct {
	held bool // the call waited for approval
	// changed are the files the decided paths named after the call, when
	// one was not the decided file; set by runUpstream.
	changed map[string]toolpolicy.File
	// reached are the labels of the files a run call's view holds (see
	// reach.go).
	reached []string
	// named says a path named another file: the refusal counts toward
	// the loop and probing rules. A directory that changed, or kept
	// changing, or another file written, is no sign of the agent's:
	// anything writing in the workspace does it.
	named bool
	// started is when a run call was handed to its sandbox.
	started time.Time
	// sess is the state of the agent that made the call.
	sess *session
}

// sessionOf is the state of the agent whose call ctx carries; nil for a
// call run after its session ended.
func sessionOf(ctx context.Context) *session {
	if w := walkedOf(ctx); w != nil {
		return w.sess
	}
	return nil
}

type walkedKey struct{}

func withWalked(ctx context.Context, w *walked) context.Context {
	return context.WithValue(ctx, walkedKey{}, w)
}

func walkedOf(ctx context.Context) *walked {
	w, _ := ctx.Value(walkedKey{}).(*walked)
	return w
}

// stamped reports whether the resolver stamped files: a server whose files
// are on this host (a remote server's paths are names only).
func stamped(files map[string]toolpolicy.File) bool {
	for _, f := range files {
		if f.Stamp != "" {
			return true
		}
	}
	return false
}

// againTimeout bounds resolving a call's paths again, after its server
// answered (its context may have ended with the answer).
const againTimeout = 30 * time.Second

// lookSlot is a turn to look at a sandbox's view again for a call (see
// resolveSlot), with a context that ends after againTimeout whether or
// not the call's has ended; done gives both back.
func (g *Gateway) lookSlot(ctx context.Context) (_ context.Context, done func(), err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), againTimeout)
	release, err := g.resolveSlot(ctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return ctx, func() { release(); cancel() }, nil
}

// again resolves the decided paths of files again in server's view, by
// argument.
func (g *Gateway) again(ctx context.Context, server string, files map[string]toolpolicy.File) (map[string]toolpolicy.File, error) {
	ctx, done, err := g.lookSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	args := slices.Sorted(maps.Keys(files))
	paths := make([]string, len(args))
	for i, a := range args {
		paths[i] = files[a].Path
	}
	_, res, err := g.cfg.Resolve(ctx, server, paths)
	if err != nil {
		return nil, err
	}
	if len(res) != len(paths) {
		return nil, fmt.Errorf("%d answers for %d paths", len(res), len(paths))
	}
	out := map[string]toolpolicy.File{}
	for i, a := range args {
		r := res[i]
		if r.Error != "" {
			return nil, fmt.Errorf("%s: %s", paths[i], r.Error)
		}
		out[a] = PolicyFile(r.File)
	}
	return out, nil
}

// hold is what a file a call named must still be.
type hold int

const (
	holdFile  hold = iota // the same path, existence and identity
	holdRead              // and the same directories on the path
	holdWrite             // the same path under the same directories above its own (a write changes its file and the directory that holds it)
)

// differs says how the files a call's paths name now differ from those it
// was decided (or approved, or last checked) on; "" when they do not.
func differs(h hold, was, now map[string]toolpolicy.File) string {
	var out []string
	for _, a := range slices.Sorted(maps.Keys(was)) {
		w, n := was[a], now[a]
		switch {
		case n.Path != w.Path:
			out = append(out, fmt.Sprintf("%s (%s) names %s now", w.Path, a, n.Path))
		case h != holdWrite && !w.Same(n):
			out = append(out, fmt.Sprintf("%s (%s) is another file now", w.Path, a))
		case h == holdRead && n.Stamp != w.Stamp, h == holdWrite && n.Above != w.Above:
			out = append(out, fmt.Sprintf("a directory on the path %s (%s) was changed", w.Path, a))
		}
	}
	return strings.Join(out, "; ")
}

// unsettled names the paths whose directories kept changing while they
// were resolved.
func unsettled(files map[string]toolpolicy.File) string {
	var out []string
	for _, a := range slices.Sorted(maps.Keys(files)) {
		if files[a].Unsettled {
			out = append(out, files[a].Path)
		}
	}
	return strings.Join(out, ", ")
}

// checkBefore holds a call that waited for approval, or whose directories
// were changing when it was decided, to its files now, before its server
// acts: the files it will be checked against afterwards, or why the call
// is not made.
func (g *Gateway) checkBefore(ctx context.Context, t *tool, files map[string]toolpolicy.File) (map[string]toolpolicy.File, string) {
	w := walkedOf(ctx)
	if (w == nil || !w.held) && unsettled(files) == "" {
		return files, ""
	}
	now, err := g.again(ctx, t.server, files)
	if err != nil {
		return nil, fmt.Sprintf("the paths of %s could not be resolved again before it ran (%v)", t.def.Name, err)
	}
	// Before it runs, a write's file is held to what was decided too.
	if why := differs(holdFile, files, now); why != "" {
		if w != nil {
			w.named = true
		}
		return nil, why + ", not the file the call was decided on"
	}
	if u := unsettled(now); u != "" {
		return nil, fmt.Sprintf("the directories on %s keep changing: which file the server would act on cannot be known", u)
	}
	return now, ""
}

// checkAfter resolves the call's paths again once its server answered:
// why what it did is not shown, "" when every path still names what it
// did. A write is also held to the files it was sent: no other file of
// the server's writable directories may have changed since it started.
func (g *Gateway) checkAfter(ctx context.Context, t *tool, reads bool, files map[string]toolpolicy.File, started time.Time) string {
	now, err := g.again(ctx, t.server, files)
	if err != nil {
		return fmt.Sprintf("the paths of %s could not be resolved again after it ran (%v)", t.def.Name, err)
	}
	h := holdWrite
	if reads {
		h = holdRead
	}
	why := differs(h, files, now)
	changed := now
	if !reads {
		others, w := g.othersWritten(ctx, t, files, started)
		if w != "" {
			why = strings.TrimPrefix(why+"; "+w, "; ")
			changed = maps.Clone(now)
			for i, f := range others {
				changed[fmt.Sprintf("other[%d]", i)] = f
			}
		}
	}
	if why != "" {
		if w := walkedOf(ctx); w != nil {
			w.changed = changed
			// Only the decided path naming another file is the mark of
			// a swap: other files changing may be anyone's writes.
			w.named = differs(holdFile, files, now) != ""
		}
	}
	return why
}

// writing notes the paths a tool server's write of this gateway is about
// to act on, until done is called: another write's check does not take
// them for files its server was led to (two writes of one agent at once).
func (g *Gateway) writing(files map[string]toolpolicy.File) (done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight == nil {
		g.inflight = map[string]int{}
	}
	for _, f := range files {
		g.inflight[f.Path]++
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, f := range files {
			if g.inflight[f.Path]--; g.inflight[f.Path] <= 0 {
				delete(g.inflight, f.Path)
			}
			if g.wrote == nil {
				g.wrote = map[string]time.Time{}
			}
			g.wrote[f.Path] = time.Now()
		}
		for p, at := range g.wrote {
			if time.Since(at) > time.Second {
				delete(g.wrote, p)
			}
		}
	}
}

// ours reports whether a tool server's write of this gateway acts on
// path now, or did since since.
func (g *Gateway) ours(path string, since time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.wrote[path]
	return g.inflight[path] > 0 || ok && !at.Before(since)
}

// Changer finds the files under dirs (relative ones from the workspace)
// in the view of server's sandbox whose change time is since or later;
// complete is false when it could not look at every entry.
type Changer func(ctx context.Context, server string, dirs []string, since time.Time, max int) (files []toolpolicy.File, complete bool, err error)

// othersWritten finds the files other than those decided that changed, in
// the directories the server may write, since the call started: a name
// swapped for a link to a sibling and back leads the server there. It
// returns them and why that withholds the result ("" when none did).
func (g *Gateway) othersWritten(ctx context.Context, t *tool, files map[string]toolpolicy.File, started time.Time) ([]toolpolicy.File, string) {
	if g.cfg.Changed == nil {
		return nil, ""
	}
	dirs, bounded := g.cfg.Profile.ServerWrites(t.server)
	if !bounded {
		dirs = []string{"."}
	}
	if len(dirs) == 0 {
		return nil, ""
	}
	lctx, done, err := g.lookSlot(ctx)
	if err != nil {
		return nil, fmt.Sprintf("which files %s wrote could not be known (%v)", t.def.Name, err)
	}
	// The clock of change times may lag by one of its steps.
	found, complete, err := g.cfg.Changed(lctx, t.server, dirs, started.Add(-tools.SettleMargin), 64)
	done()
	if err != nil {
		return nil, fmt.Sprintf("which files %s wrote could not be known (%v)", t.def.Name, err)
	}
	decided := map[string]bool{}
	for _, f := range files {
		decided[f.Path] = true
	}
	var others []toolpolicy.File
	var names []string
	for _, f := range found {
		if !decided[f.Path] && !g.ours(f.Path, started.Add(-tools.SettleMargin)) {
			others = append(others, f)
			names = append(names, f.Path)
		}
	}
	if len(others) > 0 {
		return others, fmt.Sprintf("other files changed while it ran, in the directories it may write: %s", strings.Join(names, ", "))
	}
	if !complete {
		// The write is made; what it may have been led to cannot all be
		// named: what the session carries, every file carries.
		g.cfg.Logf("which other files changed while %s ran could not all be looked at: every file read from now on carries the labels its session carries", t.def.Name)
		if s := sessionOf(ctx); s != nil {
			s.mu.Lock()
			s.policy.SpillLabels()
			s.mu.Unlock()
		}
	}
	return nil, ""
}

// pathChanged counts a call refused because a path it named changed as a
// refusal, records what its paths named, and gives what the session
// carries to the files a write's paths name now too: the server may have
// written them.
func (g *Gateway) pathChanged(ctx context.Context, s *session, c toolpolicy.Call, step int, d toolpolicy.Decision) {
	var now map[string]toolpolicy.File
	named := false
	if w := walkedOf(ctx); w != nil {
		now, named = w.changed, w.named
	}
	s.mu.Lock()
	if named {
		s.policy.Overturned()
	}
	secret := s.carriesSecret()
	if len(now) > 0 && g.cfg.Profile.Tools[c.Tool].Class == "write" {
		s.policy.LabelCreated(toolpolicy.Call{Tool: c.Tool, Args: map[string]any{}, Workspace: c.Workspace, Files: now})
	}
	s.mu.Unlock()
	g.keepLabels()
	r := redactor{secret: secret, budget: previewBytes}
	files := func(m map[string]toolpolicy.File) map[string]any {
		out := map[string]any{}
		for a, f := range m {
			out[r.text(a)] = map[string]any{"path": r.text(f.Path), "exists": f.Exists, "dev": f.Dev, "ino": f.Ino}
		}
		return out
	}
	data := map[string]any{"tool": g.logName(c.Tool, secret), "step": step, "session": s.id, "reason": logReason(d.Reason, secret), "decided": files(c.Files)}
	if len(now) > 0 {
		data["now"] = files(now)
	}
	g.record(s, audit.Event{Kind: audit.Decision, Type: "tool_path_changed", Data: data})
}
