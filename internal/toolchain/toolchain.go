// Package toolchain finds the toolchains a profile names (python3, node,
// go, cargo, ...) as the user's own shell runs them, and says what a
// sandbox needs to run the same ones: the install prefix to bind read-only
// at the same place, and the directory to put first on the sandbox's PATH.
//
// A name is looked up on the PATH of the environment cordon was started
// in. What is found is followed, without running anything, to the program
// that really runs: version-manager shims (pyenv, rbenv, nodenv) to the
// selected version's directory, rustup's proxies (~/.cargo/bin/cargo) to
// the selected toolchain's, symbolic links to their targets. The program's
// install prefix is the directory above its bin directory
// (/usr/local/go, ~/.pyenv/versions/3.11.7, ~/.nvm/versions/node/v20.11.0),
// or its bin directory alone where the directory above holds more than one
// toolchain (a home directory, ~/.local, ~/.cargo, GOPATH, a version
// manager's root). A prefix already in the view is not bound again.
//
// Prefixes that would show more than a toolchain are refused: the host
// root, a home directory or a directory containing one, ~/.local and the
// version managers' roots, host configuration (/etc) and kernel
// interfaces, and any directory holding credentials (see package protect),
// each known by its name and its real path. What the sandbox may write
// (the workspace, a writable mount) it may have chosen: a link there ends
// the chain and nothing is bound for it; a version file is read only as a
// regular file of a trusted user, never through a link, and only a valid
// version name in it is followed or shown; a name a shell's script gives
// binds only a toolchain's install. A prefix bound is searched whole for
// credentials (an npmrc, a pip.conf, a .netrc, ...: package protect's
// catalog) at any depth, and each one found is masked in the sandbox's
// view; a prefix too large to be searched whole is not bound. Resolve
// reads the host and changes nothing.
package toolchain

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// FlagField stands for the profile field of a toolchain given on the
// command line rather than in the profile.
const FlagField = "--toolchain"

// Host is what resolution reads of the host besides its files.
type Host struct {
	// Getenv reads the environment cordon was started in: PATH, HOME and
	// the version managers' variables (PYENV_VERSION, RUSTUP_TOOLCHAIN,
	// ...). Nil reads nothing.
	Getenv func(string) (string, bool)
	// Cwd is where cordon was started: version files (.python-version,
	// rust-toolchain.toml) are looked up from it and its parents, and a
	// relative workspace is relative to it.
	Cwd string
	// Homes are the host's home directories; nil asks protect.Homes.
	Homes []string
	// Cache, when set, is a directory of cordon's own, outside every
	// sandbox's view, where the search of each prefix for credentials
	// keeps what it found until a directory of the prefix changes.
	Cache string
}

// Entry is how one name of the profile's toolchains resolved.
type Entry struct {
	// Field is the profile field that names it, e.g. "toolchains[1]", or
	// FlagField.
	Field string `json:"field"`
	Name  string `json:"name"`
	// Auto is set when Name is the command the sandbox was started with.
	Auto bool `json:"auto,omitempty"`
	// Found is where the PATH cordon was started with finds Name.
	Found string `json:"found,omitempty"`
	// Via says which version a version manager selects, and why.
	Via string `json:"via,omitempty"`
	// Program is the program that runs, links followed.
	Program string `json:"program,omitempty"`
	// Prefix is the program's install prefix; Bound says whether the
	// sandbox binds it (read-only, at the same place) or already sees it.
	Prefix string `json:"prefix,omitempty"`
	Bound  bool   `json:"bound,omitempty"`
	// Masked are the credentials found in a bound prefix, relative to it,
	// which the sandbox sees empty.
	Masked []string `json:"masked,omitempty"`
	// Own is set when Program is the sandbox's own file: in a directory
	// the sandbox may write, or reached through a link there. Nothing is
	// bound for it, and links are not followed past it.
	Own bool `json:"own,omitempty"`
	// PathDir is put first on the sandbox's PATH; empty when that PATH
	// already finds Program, or when NoPath says why none is.
	PathDir string `json:"path_dir,omitempty"`
	// NoPath says why no directory is put on the sandbox's PATH for a
	// program that PATH does not find.
	NoPath string `json:"no_path,omitempty"`
	// Missing says why nothing is bound for Name, when nothing is.
	Missing string `json:"missing,omitempty"`

	// dir is the directory the PATH should find Name in.
	dir string
}

// Plan is what a sandbox needs for a profile's toolchains.
type Plan struct {
	Entries []Entry `json:"entries,omitempty"`
	// Path is the sandbox's PATH with the toolchains' directories first;
	// empty leaves the profile's.
	Path string `json:"path,omitempty"`

	warnings []string
	// masks are, by prefix, the paths each bind masks.
	masks map[string][]string
}

// Binds are the host directories to bind read-only at the same place, none
// inside another.
func (pl *Plan) Binds() []string {
	var out []string
	if pl == nil {
		return nil
	}
	for _, e := range pl.Entries {
		if e.Bound {
			out = append(out, e.Prefix)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(a) - len(b) })
	var kept []string
	for _, b := range out {
		if !slices.ContainsFunc(kept, func(k string) bool { return within(b, k) }) {
			kept = append(kept, b)
		}
	}
	slices.Sort(kept)
	return kept
}

// Warnings say which names the profile lists resolve to nothing here,
// each where the profile names it, which prefixes hold credentials that
// the sandbox sees masked, and which names a script gives are left out
// because their prefix could not be searched for credentials.
func (pl *Plan) Warnings() []string {
	if pl == nil {
		return nil
	}
	return pl.warnings
}

// Notes say what the plan changes in the sandbox's view and PATH, and
// which started command resolved to nothing here.
func (pl *Plan) Notes() []string {
	var out []string
	if pl == nil {
		return nil
	}
	for _, e := range pl.Entries {
		if e.Bound || e.Own || e.PathDir != "" || e.NoPath != "" || (e.Missing != "" && e.Auto) {
			out = append(out, "toolchain "+e.String())
		}
	}
	return out
}

// String says in one line how the entry resolved: name -> program found ->
// program run, the prefix bound, the PATH entry.
func (e Entry) String() string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Auto {
		b.WriteString(" (auto)")
	}
	if e.Missing != "" {
		b.WriteString(": not bound: " + e.Missing)
		return b.String()
	}
	b.WriteString(": " + e.Found)
	if e.Program != e.Found {
		b.WriteString(" -> " + e.Program)
	}
	if e.Via != "" {
		b.WriteString(" (" + e.Via + ")")
	}
	switch {
	case e.Own:
		b.WriteString("; the sandbox's own file (where the sandbox may write): nothing is bound for it")
	case e.Bound:
		b.WriteString("; binds " + e.Prefix + " read-only")
		if len(e.Masked) > 0 {
			b.WriteString(", credentials in it masked: " + maskedList(e.Masked))
		}
	default:
		b.WriteString("; " + e.Prefix + " is in the view already")
	}
	switch {
	case e.NoPath != "":
		b.WriteString("; " + e.NoPath)
	case e.PathDir != "":
		b.WriteString("; PATH starts with " + e.PathDir)
	default:
		b.WriteString("; the sandbox's PATH finds it")
	}
	return b.String()
}

// Resolve resolves p's toolchains on the host; command is the command the
// sandbox is started with (what auto stands for when it is a name, not a
// path), "" for none. A prefix that cannot be bound is an error (a
// *profile.Error) located at the profile field that named it; a name that
// resolves to nothing is an entry saying so. A name given on the command
// line (profile.AddToolchain) is reported as FlagField's.
func Resolve(p *profile.Profile, command string, h Host) (*Plan, error) {
	return ResolveRun(p, []string{command}, h)
}

// ResolveRun is Resolve for a run of argv: auto also stands for the
// commands a shell's -c script starts (ScriptCommands), which add to the
// view only what resolves to a toolchain's install (toolchainInstall);
// one that resolves to nothing, to a prefix cordon refuses or to any
// other directory is left out, silently.
func ResolveRun(p *profile.Profile, argv []string, h Host) (*Plan, error) {
	if len(p.Toolchains) == 0 {
		return &Plan{}, nil
	}
	command := ""
	if len(argv) > 0 {
		command = argv[0]
	}
	r := newResolver(p, h)
	pl := &Plan{}
	seen := map[string]bool{}
	fromScript := map[string]bool{}
	for i, name := range p.Toolchains {
		field := fmt.Sprintf("toolchains[%d]", i)
		switch {
		case p.Written(field):
		case i == 0 && p.Written("toolchains"):
			field = "toolchains" // toolchains: auto
		default:
			field = FlagField
		}
		auto := name == profile.Auto
		if auto {
			// The script is the agent's to write: what it names is bound
			// only from a toolchain's install. A name the profile lists,
			// or the command itself, is resolved as such.
			for _, c := range ShellCommands(argv) {
				if seen[c] || c == command || slices.Contains(p.Toolchains, c) {
					continue
				}
				e, err := r.resolve(c)
				if err != nil || e.Missing != "" || (e.Bound && !r.toolchainInstall(e)) {
					continue
				}
				seen[c] = true
				e.Field, e.Name, e.Auto = field, c, true
				pl.Entries = append(pl.Entries, e)
				fromScript[c] = true
			}
			// A command given as a path names its file: the view shows it
			// or not, as the profile says.
			if strings.ContainsRune(command, '/') {
				continue
			}
			name = command
		}
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		e, err := r.resolve(name)
		if err != nil {
			return nil, r.errorAt(field, name, auto, err)
		}
		e.Field, e.Name, e.Auto = field, name, auto
		pl.Entries = append(pl.Entries, e)
		if e.Missing != "" && !auto {
			w := fmt.Sprintf("%s %s: %s; nothing is bound for it", FlagField, name, e.Missing)
			if field != FlagField {
				w = fmt.Sprintf("%s: %s: %s: %s; nothing is bound for it", r.where(field), field, name, e.Missing)
			}
			pl.warnings = append(pl.warnings, w)
		}
	}
	if err := r.maskCredentials(pl, fromScript); err != nil {
		return nil, err
	}
	pl.Path = r.sandboxPath(pl.Entries)
	// What a script starts is listed only where it changes the view.
	pl.Entries = slices.DeleteFunc(pl.Entries, func(e Entry) bool { return fromScript[e.Name] && !e.Bound && e.PathDir == "" })
	return pl, nil
}

// viewMount is one bind of the sandbox's view.
type viewMount struct {
	host, dest string
	writable   bool
}

// resolver resolves names for one profile on one host.
type resolver struct {
	p      *profile.Profile
	cache  string // Host.Cache
	getenv func(string) (string, bool)
	cwd    string
	// homes are the host's homes, each as given and with its links
	// resolved; they, sharedDirs and credDirs are found when first needed
	// (homesLoaded, see loadHomes).
	homes       []string
	homesLoaded bool
	// sharedDirs are the directories that hold many programs besides the
	// homes (~/.local, CARGO_HOME, ...), as given and resolved, each with
	// why.
	sharedDirs map[string]string
	// credDirs are the homes' stores of credentials where a link leads
	// them out of their home (~/.ssh -> /secure/ssh).
	credDirs []credDir
	hostPath []string // the absolute directories of the host's PATH
	view     []viewMount
	// writable are the host directories the sandbox may write, as given
	// and resolved.
	writable []string
	basePath string // the sandbox's PATH without toolchains
}

// credDir is a store of credentials by its real path.
type credDir struct{ name, path string }

func newResolver(p *profile.Profile, h Host) *resolver {
	r := &resolver{p: p, getenv: h.Getenv, cwd: h.Cwd, homes: h.Homes, cache: h.Cache}
	if r.getenv == nil {
		r.getenv = func(string) (string, bool) { return "", false }
	}
	if path, ok := r.getenv("PATH"); ok {
		r.hostPath = absDirs(path)
	}
	for _, m := range p.Mounts {
		r.view = append(r.view, viewMount{host: m.Path, dest: m.Dest(), writable: m.Writable})
	}
	if ws := p.Workspace.Path; ws != "" {
		if !filepath.IsAbs(ws) {
			ws = filepath.Join(h.Cwd, ws)
		}
		ws = filepath.Clean(ws)
		dest := p.Workspace.Target
		if dest == "" {
			dest = ws
		}
		r.view = append(r.view, viewMount{host: ws, dest: dest, writable: p.Workspace.Writable})
	}
	for _, m := range r.view {
		if m.writable {
			r.writable = append(r.writable, withReal(m.host)...)
		}
	}
	for _, kv := range p.Environ(r.getenv) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			r.basePath = v
		}
	}
	return r
}

// loadHomes finds the homes, their shared directories and where their
// stores of credentials lead, once, when a prefix is first judged: a run
// whose command names no toolchain (a path, a shell's builtins) does not
// look at every account's home.
func (r *resolver) loadHomes() {
	if r.homesLoaded {
		return
	}
	r.homesLoaded = true
	if r.homes == nil {
		r.homes = protect.Homes()
	}
	r.homes = withReal(r.homes...)
	r.sharedDirs = map[string]string{}
	for _, h := range r.homes {
		for _, u := range userDirs {
			for _, d := range withReal(filepath.Join(h, u)) {
				r.sharedDirs[d] = "is shared by the programs of " + h
			}
		}
		for _, c := range protect.Credentials() {
			if real, err := protect.EvalSymlinks(filepath.Join(h, c)); err == nil && !within(real, h) {
				r.credDirs = append(r.credDirs, credDir{name: c, path: real})
			}
		}
	}
	for _, v := range sharedVars {
		val, _ := r.getenv(v)
		for _, d := range withReal(absDirs(val)...) {
			r.sharedDirs[d] = "is " + v
		}
	}
}

// where is the place in the profile's file of field, as errors give it.
func (r *resolver) where(field string) string {
	file, line, col := r.p.Locate(field)
	if file == "" {
		file = profile.DefaultName
	}
	if line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d:%d", file, line, col)
}

// errorAt locates a problem with name at the profile field, or says it
// was given with --toolchain.
func (r *resolver) errorAt(field, name string, auto bool, err error) error {
	if field == FlagField {
		return fmt.Errorf("%s %s: %w", FlagField, name, err)
	}
	file, line, col := r.p.Locate(field)
	if file == "" {
		file = profile.DefaultName
	}
	what := name
	if auto {
		what = "auto: the command " + name
	}
	return &profile.Error{File: file, Line: line, Col: col, Field: field, Msg: fmt.Sprintf("%s: %v", what, err)}
}

// absDirs splits a PATH, keeping its absolute directories: an empty or
// relative entry names the current directory, which is the workspace's
// business, not a toolchain's.
func absDirs(path string) []string {
	var out []string
	for _, d := range filepath.SplitList(path) {
		if filepath.IsAbs(d) {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// LookPath finds name on the PATH path as a shell would, in its absolute
// directories: the first regular, executable file; "" when none is.
func LookPath(name, path string) string {
	return lookPath(name, absDirs(path))
}

// lookPath finds name in dirs as a shell would: the first regular,
// executable file (links followed).
func lookPath(name string, dirs []string) string {
	for _, d := range dirs {
		if f := filepath.Join(d, name); executable(f) {
			return f
		}
	}
	return ""
}

func executable(f string) bool {
	fi, err := os.Stat(f)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// visible returns the bind of the view that shows host path p at the same
// place, if any.
func (r *resolver) visible(p string) (viewMount, bool) {
	var best viewMount
	found := false
	for _, m := range r.view {
		if within(p, m.dest) && (!found || len(m.dest) > len(best.dest)) {
			best, found = m, true
		}
	}
	if !found || best.host != best.dest {
		return viewMount{}, false
	}
	// A bind whose own path is a link shows the link, not the tree.
	if real, err := filepath.EvalSymlinks(best.host); err != nil || real != best.host {
		return viewMount{}, false
	}
	return best, true
}
