package cli

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/lint"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// profileFlags are the flags that choose and adjust a profile, shared by run
// and profile show.
type profileFlags struct {
	file          string
	workspace     string
	ro, rw        list
	limits, allow list
	toolchains    list
	transparent   bool
	review, guard bool
	roWorkspace   bool
	// homeFirst: open refuses a workspace that is a home directory before
	// anything else (see homeWorkspace); set by commands that run one.
	homeFirst bool
	// lintGate: open refuses a profile lint rates an error, unless
	// allowLintErrors (--allow-lint-errors); set by the commands that
	// register that flag. authored is the profile as its file (or the
	// embedded default) has it, before the flags adjust it; lintAllowed
	// the errors a run goes on with, to be said in its outcome.
	lintGate, allowLintErrors bool
	authored                  *profile.Profile
	lintAllowed               []lint.Finding
}

// registerLintGate adds --allow-lint-errors, and has open refuse a
// profile with lint errors without it.
func (pf *profileFlags) registerLintGate(fs *flag.FlagSet) {
	pf.lintGate = true
	fs.BoolVar(&pf.allowLintErrors, "allow-lint-errors", false, "run even if cordon lint rates the profile an error (the outcome's notes name each one)")
}

func (pf *profileFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&pf.file, "profile", "", "profile `FILE` (default: the embedded default profile)")
	fs.StringVar(&pf.workspace, "workspace", "", "workspace `DIR`, bound read-write (default: the profile's; the default profile's is the current directory, or for cordon run the top of the git repository holding it)")
	fs.Var(&pf.ro, "ro", "bind host `PATH` read-only at the same place (repeatable)")
	fs.Var(&pf.rw, "rw", "bind host `PATH` read-write at the same place (repeatable)")
	fs.BoolVar(&pf.roWorkspace, "ro-workspace", false, "bind the workspace read-only; what --rw binds inside it stays writable")
	fs.Var(&pf.limits, "limit", "set a resource limit, `NAME=VALUE` (e.g. memory=512MiB, wall=30s); repeatable")
	fs.BoolVar(&pf.transparent, "transparent", false, "also carry clients that ignore the proxy variables: capture their TCP and answer their DNS (needs nftables in the kernel)")
	fs.Var(&pf.toolchains, "toolchain", "run the host's `NAME` (python3, go, cargo, ...) as your PATH finds it: its install prefix bound read-only, its directory first on PATH; repeatable")
	fs.BoolVar(&pf.review, "review", false, "review the workspace's changes: the sandbox writes to a layer of its own, and its changes wait for cordon changes, apply or discard (workspace.mode: review)")
	fs.BoolVar(&pf.guard, "guarded", false, "guard the workspace: the sandbox writes to a layer of its own, kept on disk; when the command ends, its changes land, except what the host's tools would run or obey, which waits for cordon changes, apply or discard (workspace.mode: guarded)")
	fs.Var(&pf.allow, "allow", "let the sandbox reach `DEST` (host[:port], *.suffix[:port], ip[:port], cidr) through cordon's egress proxy; repeatable")
}

// changed reports whether any of the flags was given.
func (pf *profileFlags) changed() bool {
	return pf.file != "" || pf.workspace != "" || len(pf.ro)+len(pf.rw)+len(pf.limits)+len(pf.allow)+len(pf.toolchains) > 0 || pf.transparent || pf.review || pf.guard || pf.roWorkspace
}

// load reads the profile and applies the command-line adjustments.
func (pf *profileFlags) load(e *env) (*profile.Profile, error) {
	var p *profile.Profile
	if pf.file == "" {
		p = profile.Default()
	} else {
		var err error
		if p, err = profile.LoadFile(pf.file); err != nil {
			return nil, err
		}
	}
	if pf.lintGate {
		pf.authored = p.Clone()
	}
	if pf.workspace != "" {
		p.Workspace.Path = pf.abs(e, pf.workspace)
		p.Workspace.Writable = true
	}
	if pf.roWorkspace {
		if p.Workspace.Path == "" {
			return nil, fmt.Errorf("--ro-workspace: the profile has no workspace")
		}
		p.Workspace.Writable = false
	}
	for _, spec := range []struct {
		paths    list
		flag     string
		writable bool
	}{{pf.ro, "--ro", false}, {pf.rw, "--rw", true}} {
		for _, path := range spec.paths {
			if err := p.AddMount(pf.abs(e, path), spec.writable); err != nil {
				return nil, fmt.Errorf("%s %s: %w", spec.flag, path, err)
			}
		}
	}
	for _, l := range pf.limits {
		name, value, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("--limit %s: want NAME=VALUE", l)
		}
		if err := p.SetLimit(name, value); err != nil {
			return nil, fmt.Errorf("--limit %w", err)
		}
	}
	if pf.transparent {
		p.Network.Transparent = true
	}
	if pf.review && pf.guard {
		return nil, fmt.Errorf("--review and --guarded: choose one")
	}
	for _, m := range []struct {
		on         bool
		flag, mode string
	}{{pf.review, "--review", profile.ModeReview}, {pf.guard, "--guarded", profile.ModeGuarded}} {
		if !m.on {
			continue
		}
		if p.Workspace.Path == "" {
			return nil, fmt.Errorf("%s: the profile has no workspace (set workspace.path, or give --workspace DIR)", m.flag)
		}
		if !p.Workspace.Writable {
			return nil, fmt.Errorf("%s: the profile's workspace is read-only (workspace.writable: false), so there is nothing to judge", m.flag)
		}
		p.Workspace.Mode = m.mode
	}
	for _, name := range pf.toolchains {
		if err := p.AddToolchain(name); err != nil {
			return nil, fmt.Errorf("--toolchain %w", err)
		}
	}
	for _, d := range pf.allow {
		if err := p.AddAllow(d); err != nil {
			return nil, fmt.Errorf("--allow %w", err)
		}
	}
	return p, nil
}

// open reads the profile and what a sandbox of it needs before it is built:
// the layers it may go without (--allow-degraded and the profile's), its
// approval (see gate), and the audit log (no log, no run).
func (pf *profileFlags) open(e *env, degraded list, logFlag string) (*profile.Profile, map[string]bool, *auditLog, error) {
	allow, err := degradedLayers(degraded)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := pf.load(e)
	if err != nil {
		return nil, nil, nil, err
	}
	if pf.homeFirst {
		if err := homeWorkspace(e, p); err != nil {
			return nil, nil, nil, err
		}
	}
	if err := pf.gate(e, p, allow); err != nil {
		return nil, nil, nil, err
	}
	if err := pf.lint(e); err != nil {
		return nil, nil, nil, err
	}
	al, err := openAudit(e, logFlag, p)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("audit log: %w", err)
	}
	return p, allow, al, nil
}

// lint refuses, where the command gates on it, a profile cordon lint
// rates an error: a secret handed over, writes or network left unscoped,
// a limit unbounded. It judges the profile as written, not the flags that
// adjust it for one run, and leaves approval records to gate and probe
// reports to cordon lint. With --allow-lint-errors it warns and keeps the
// errors for the outcome's notes.
func (pf *profileFlags) lint(e *env) error {
	if !pf.lintGate || pf.authored == nil {
		return nil
	}
	file := ""
	if pf.file != "" {
		file = pf.abs(e, pf.file)
	}
	errs := lintErrors(file, pf.authored)
	if len(errs) == 0 {
		return nil
	}
	name := pf.file
	if name == "" {
		name = profile.DefaultName
	}
	if !pf.allowLintErrors {
		return lintRefusal(name, errs)
	}
	lintWarning(e, name, errs)
	pf.lintAllowed = errs
	return nil
}

// lintRefusal is the error of a profile whose lint errors stop a run.
func lintRefusal(name string, errs []lint.Finding) error {
	return fmt.Errorf("the profile %s has %s, which stop a run (cordon lint %s shows them; --allow-lint-errors runs anyway, and says so):\n%s", name, lintCount(len(errs)), name, lintText(errs))
}

// lintWarning says that a run goes on with a profile's lint errors.
func lintWarning(e *env, name string, errs []lint.Finding) {
	fmt.Fprintf(e.stderr, "cordon: warning: running with %s in the profile %s, as --allow-lint-errors asked:\n%s\n", lintCount(len(errs)), name, lintText(errs))
}

// lintText is the findings as cordon lint prints them, without its count.
func lintText(errs []lint.Finding) string {
	var b strings.Builder
	lint.WriteText(&b, errs)
	text := strings.TrimSuffix(b.String(), "\n")
	return termsafe.Text(text[:strings.LastIndexByte(text, '\n')])
}

// lintErrors are the findings of severity error of cordon lint's rules on
// one profile, but the approval record's (gate's to judge).
func lintErrors(file string, p *profile.Profile) []lint.Finding {
	c := &lint.Context{Targets: []*lint.Target{{Path: file, Profile: p}}, Now: time.Now()}
	var errs []lint.Finding
	for _, f := range lint.Run(c) {
		if f.Severity == lint.Error && f.Code != "CL502" {
			errs = append(errs, f)
		}
	}
	return errs
}

func lintCount(n int) string {
	if n == 1 {
		return "1 lint error"
	}
	return fmt.Sprintf("%d lint errors", n)
}

// lintNotes are the outcome's notes of the lint errors a run went on with.
func (pf *profileFlags) lintNotes() []string {
	var notes []string
	for _, f := range pf.lintAllowed {
		notes = append(notes, fmt.Sprintf("ran with lint error %s %s (%s), as --allow-lint-errors asked", f.Code, f.Rule, f.Message))
	}
	return notes
}

// gate applies the profile's governance before a sandbox is built from it:
// with governance.require_approval, a profile that grew since its approval
// is refused (changes within it are reported on stderr); the layers the
// profile allows to be degraded join allow.
func (pf *profileFlags) gate(e *env, p *profile.Profile, allow map[string]bool) error {
	file := ""
	if pf.file != "" {
		file = pf.abs(e, pf.file)
	}
	warnings, err := approval.Gate(file, p)
	if err != nil {
		return err
	}
	// Where a sandbox could write cordon's records of approved profiles, it
	// could approve any profile, its own next one or another's; where it
	// could read them, the records of its own governed profile are no
	// secret, but its view should not hold them either.
	records := filepath.Join(approval.StateDir(), "record")
	if where := writableIn(e, p, e.cwd, records); where != "" {
		return fmt.Errorf("cordon's records of approved profiles (%s) are inside %s, which the sandbox may write (it could approve any profile): set CORDON_STATE_DIR to a place outside every writable workspace and bind", approval.StateDir(), where)
	}
	if where := visibleIn(e, p, e.cwd, records); where != "" && approval.Governed(file, p) {
		return fmt.Errorf("cordon's records of approved profiles (%s) are inside %s, which the sandbox can see: set CORDON_STATE_DIR to a place outside every workspace and mount", approval.StateDir(), where)
	}
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "cordon: %s\n", w)
	}
	for _, l := range p.AllowDegraded {
		allow[l] = true
	}
	return nil
}

// homeWorkspace refuses, unless the profile allows it, a workspace that
// is an account's home directory. The sandbox's build refuses it too (and
// searches any workspace for homes and stores of credentials), but said
// here it comes before what follows from it: cordon's own state and logs,
// under the home, in the sandbox's view.
func homeWorkspace(e *env, p *profile.Profile) error {
	ws := p.Workspace.Path
	if ws == "" || p.Workspace.AllowSensitive {
		return nil
	}
	if !filepath.IsAbs(ws) {
		ws = filepath.Join(e.cwd, ws)
	}
	if rws := resolve(ws); slices.Contains(protect.Homes(), rws) {
		return fmt.Errorf("workspace %s: %s is a home directory: %s", ws, rws, sandbox.SensitiveRefusal)
	}
	return nil
}

func (pf *profileFlags) abs(e *env, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(e.cwd, p)
}

// guarded are the host files sandboxes of this profile must not change
// (see guarded).
func (pf *profileFlags) guarded(e *env) []string {
	if pf.file == "" {
		return guarded("")
	}
	return guarded(pf.abs(e, pf.file))
}
