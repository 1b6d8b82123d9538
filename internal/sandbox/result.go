package sandbox

import (
	"context"
	"io"
	"net/netip"
	"os"

	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// Layers that may be skipped with --allow-degraded.
const (
	LayerLandlock = "landlock"
	LayerSeccomp  = "seccomp"
)

// LayerCgroup may be skipped when no cgroup is delegated to cordon: memory
// and CPU bandwidth then go unenforced, and processes and CPU time are
// limited per process by rlimits.
const LayerCgroup = "cgroup"

// LayerIdmap may be skipped when cordon runs as root and a writable bind
// owned by root (the workspace) is on a file system that cannot be
// idmapped, such as overlayfs, a container's root: the sandbox user then
// maps to the workspace's owner, host root, instead of nobody.
const LayerIdmap = "idmap"

// DegradableLayers lists the layers --allow-degraded accepts.
var DegradableLayers = profile.DegradableLayers

// Options describe one contained run.
type Options struct {
	Profile *profile.Profile
	Args    []string
	// AllowDegraded names layers the run may go without when the host lacks
	// them.
	AllowDegraded map[string]bool
	// Cwd resolves a relative workspace path.
	Cwd string
	// Subdir is where the command starts, relative to the workspace: a
	// directory beneath it; "" starts it at the workspace's top.
	Subdir string
	// LookupEnv reads cordon's own environment, for env.pass.
	LookupEnv func(string) (string, bool)
	// SelfExec runs cordon itself as the command, with Args as its
	// arguments (see Spec.SelfExec).
	SelfExec bool
	// Exe is the sealed copy of cordon to start init from; nil makes one.
	Exe *Executable

	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File
	// StderrLines, when set, is Stderr as a termsafe.Stream: what the
	// command writes to Stderr (and to Stdout, when it is the same file)
	// passes through it, and cordon's own lines during the run (egress
	// refusals, drift) are written to it as its own, each on a line of its
	// own; so are the caller's after Run.
	StderrLines *termsafe.Stream
	// Taps, when set, also receive what reaches Stdout and Stderr (after
	// the output cap): what the agent will read. On a terminal both
	// streams are one, given to Taps[0].
	Taps [2]io.Writer
	// OnEgress, when set, is told of each egress decision as the proxy
	// makes it.
	OnEgress func(egress.Event)
	// ProfileFile is the file the profile was read from, "" for the
	// embedded one; a drift check sees it edited.
	ProfileFile string
	// WalkIndex, when set, is a directory of cordon's own, outside every
	// view, where the look after a run in direct mode keeps what it found
	// of each writable bind, so that the next look lists only what changed
	// (see protect.FindMade).
	WalkIndex string
	// Guard are host files that no writable part of the view may change
	// (the profile, its approval record, cordon's configuration): inside
	// one, they are kept read-only as the protected paths are.
	Guard []string
	// Resolve, when set, is the egress proxy's resolver instead of the
	// host's (the escape probes plant one to see what cordon looks up).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)

	// Toolchains are the profile's toolchains as resolved on this host
	// (see package toolchain); nil resolves them here, from Args[0] (for
	// auto), LookupEnv and Cwd.
	Toolchains *toolchain.Plan

	// JournalDir is a directory of cordon's own, outside every view, where
	// what the sandbox makes on the host (its cgroups, the protected
	// paths' placeholders) is written before it is made, for a later
	// cordon to remove if this one dies first (see package journal); ""
	// writes none, and what a killed cordon made stays.
	JournalDir string

	// CacheRoot is a directory of cordon's own, outside every view, that
	// holds each agent's caches (the profile's caches:, see package
	// cache); "" keeps none, and a note says so when the profile names
	// some.
	CacheRoot string

	// Log, for a kept-alive sandbox (Start), receives the egress proxy's
	// refusals and drift reports; nil discards them.
	Log io.Writer

	// Review, for a workspace in review mode, is called once the sandbox
	// has ended (no process of it runs any more) with the root of its
	// copy-on-write layer, which holds LayerUpper, to keep the changes
	// somewhere the sandbox never saw; what it returns becomes the
	// outcome's Changes. Without it, the changes are dropped.
	Review func(layer *os.File) (*outcome.Changes, error)

	// LayerDir, for a guarded workspace (workspace.mode: guarded), is the
	// host directory its copy-on-write layer is kept in: empty, on disk,
	// outside every sandbox's view, ideally on the workspace's own file
	// system. Review is called with it once the sandbox has ended.
	// Without it, a guarded workspace's layer is a tmpfs, as a reviewed
	// one's.
	LayerDir string

	keepAlive bool // set by Start
}

// SetupError is a failure of cordon itself, before or while the sandbox was
// built; the command did not run.
type SetupError struct {
	Stage string
	Err   error
}

func (e *SetupError) Error() string { return e.Stage + ": " + e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

func setupErr(stage string, err error) error {
	if err == nil {
		return nil
	}
	return &SetupError{Stage: stage, Err: err}
}

// SameFile reports whether a and b are one open file (stderr redirected to
// stdout, one terminal for both), where the last line either stream left
// open is the one that a line of cordon's would continue.
func SameFile(a, b *os.File) bool {
	if a == nil || b == nil {
		return false
	}
	sa, err := a.Stat()
	if err != nil {
		return false
	}
	sb, err := b.Stat()
	return err == nil && os.SameFile(sa, sb)
}
