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

// maxHops bounds the symbolic links followed from a program, as the
// kernel's own limit does.
const maxHops = 40

// resolve finds name on the host's PATH and works out what the sandbox
// needs for it.
func (r *resolver) resolve(name string) (Entry, error) {
	var e Entry
	if e.Found = lookPath(name, r.hostPath); e.Found == "" {
		e.Missing = "found nowhere on the PATH cordon was started with"
		return e, nil
	}
	if r.sandboxWrites(e.Found) {
		// The sandbox's own file, whatever it points to: nothing of the
		// host is bound for it.
		e.Program, e.dir, e.Prefix, e.Own = e.Found, filepath.Dir(e.Found), filepath.Dir(e.Found), true
		return e, nil
	}
	prog, via, missing := r.throughManagers(e.Found, name)
	if missing != "" {
		e.Missing = missing
		return e, nil
	}
	e.Via = via
	chain, err := hops(prog)
	if err != nil {
		return e, err
	}
	// A link the sandbox may have written, anywhere on the way, makes
	// what follows it the sandbox's choice: the chain ends there, and
	// nothing is bound for it.
	for i, h := range chain {
		if r.sandboxWrites(h) {
			e.Program, e.Prefix, e.Own = h, filepath.Dir(h), true
			if i == 0 && prog == e.Found {
				e.dir = filepath.Dir(h)
			}
			return e, nil
		}
	}
	e.Program = chain[len(chain)-1]
	// The first link whose prefix holds the rest of the chain: the PATH
	// finds the name there, and what it points to is bound with it.
	for i, h := range chain {
		prefix := r.prefixOf(h)
		if !slices.ContainsFunc(chain[i:], func(c string) bool { return !within(c, prefix) }) {
			e.Prefix, e.dir = prefix, filepath.Dir(h)
			break
		}
	}
	if _, ok := r.visible(e.Prefix); ok {
		return e, nil
	}
	if why := r.refused(e.Prefix); why != "" {
		return e, fmt.Errorf("resolves to %s, whose install prefix %s %s", e.Program, e.Prefix, why)
	}
	e.Bound = true
	return e, nil
}

// sandboxWrites reports whether host path p, as given or with its
// directory's links resolved, is in a directory the sandbox may write:
// what is there, the sandbox may have put there.
func (r *resolver) sandboxWrites(p string) bool {
	cands := []string{p}
	if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		cands = append(cands, filepath.Join(d, filepath.Base(p)))
	}
	for _, w := range r.writable {
		for _, c := range cands {
			if within(c, w) {
				return true
			}
		}
	}
	return false
}

// hops follows the symbolic links from p to the file it names, each step
// with its directory's links resolved.
func hops(p string) ([]string, error) {
	var out []string
	for range maxHops {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return nil, fmt.Errorf("following %s: %w", p, err)
		}
		p = filepath.Join(dir, filepath.Base(p))
		out = append(out, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("following %s: %w", out[0], err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%s is not a regular file", p)
			}
			return out, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return nil, fmt.Errorf("following %s: %w", out[0], err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		p = filepath.Clean(target)
	}
	return nil, fmt.Errorf("following %s: too many symbolic links", out[0])
}

// prefixOf is the install prefix of the program at p: the directory above
// its bin directory, or the bin directory alone when the directory above
// holds more than one toolchain; the program's directory when that is not
// a bin directory.
func (r *resolver) prefixOf(p string) string {
	dir := filepath.Dir(p)
	if b := filepath.Base(dir); b == "bin" || b == "sbin" {
		if up := filepath.Dir(dir); up != "/" && r.shared(up) == "" {
			return up
		}
	}
	return dir
}

// userDirs are directories of a home that hold many programs' files.
var userDirs = []string{".local", ".config", ".cache", ".cargo", "go"}

// sharedVars name directories that hold many toolchains or programs.
var sharedVars = []string{"CARGO_HOME", "GOPATH", "RUSTUP_HOME", "PYENV_ROOT", "RBENV_ROOT", "NODENV_ROOT", "NVM_DIR"}

// shared says why directory d holds more than one toolchain (a home
// directory, one of a home's shared directories, CARGO_HOME or GOPATH, a
// version manager's root), or "". Each is known by its name as given and
// with its links resolved.
func (r *resolver) shared(d string) string {
	r.loadHomes()
	if slices.Contains(r.homes, d) {
		return "is a home directory"
	}
	if why, ok := r.sharedDirs[d]; ok {
		return why
	}
	for _, sub := range []string{"versions", "toolchains"} {
		if fi, err := os.Stat(filepath.Join(d, sub)); err == nil && fi.IsDir() {
			return "is a version manager's root (it holds " + sub + "/)"
		}
	}
	return ""
}

// withReal is paths with, after each, its links resolved where that
// differs and exists.
func withReal(paths ...string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, p)
		if real, err := protect.EvalSymlinks(p); err == nil && real != p {
			out = append(out, real)
		}
	}
	return out
}

// toolchainRoots are directories whose subdirectories are toolchains
// installed for the whole host (/usr/local/go, /opt/node).
var toolchainRoots = []string{"/usr/local", "/opt"}

// toolchainInstall reports whether e, which binds its prefix, found its
// program in the bin directory of a toolchain's install: a version
// manager's version (pyenv's, rbenv's or nodenv's versions/V, nvm's
// versions/node/V, asdf's or mise's installs/TOOL/V, rustup's
// toolchains/T) or a directory of toolchainRoots. A name a script gives
// is bound only from one of those, never from a directory that only holds
// the program.
func (r *resolver) toolchainInstall(e Entry) bool {
	if e.dir != filepath.Join(e.Prefix, "bin") {
		return false
	}
	up := filepath.Dir(e.Prefix)
	switch {
	case filepath.Base(up) == "versions", filepath.Base(up) == "toolchains":
		return true
	case filepath.Base(filepath.Dir(up)) == "versions", filepath.Base(filepath.Dir(up)) == "installs":
		return true
	}
	return slices.Contains(toolchainRoots, up)
}

// systemDirs are host directories no toolchain prefix may be or be in.
var systemDirs = []string{"/etc", "/proc", "/sys", "/dev", "/run", "/boot"}

// refused says why prefix cannot be bound into the sandbox, or "".
func (r *resolver) refused(prefix string) string {
	if prefix == "/" {
		return "is the whole host file system"
	}
	r.loadHomes()
	for _, h := range r.homes {
		if within(h, prefix) {
			if h == prefix {
				return "is a home directory: cordon binds a toolchain's own directory, never a home"
			}
			return "contains the home directory " + h
		}
	}
	for _, s := range systemDirs {
		if within(prefix, s) {
			return "is in " + s + ", the host's configuration or a kernel interface"
		}
	}
	if why := r.shared(prefix); why != "" {
		return why + ", which holds more than one toolchain"
	}
	creds := protect.Credentials()
	for _, c := range creds {
		if strings.Contains(prefix+"/", "/"+c+"/") {
			return "is in a store of credentials (" + c + ")"
		}
	}
	for _, cd := range r.credDirs {
		if within(prefix, cd.path) || within(cd.path, prefix) {
			return "is in a store of credentials (" + cd.name + ", " + cd.path + ")"
		}
	}
	for _, c := range creds {
		if _, err := os.Lstat(filepath.Join(prefix, c)); err == nil {
			return "holds " + c + ", a store of credentials"
		}
	}
	if msg := profile.TargetProblem(prefix); msg != "" {
		return "cannot be bound: " + msg
	}
	if home := r.p.User.Home(); within(home, prefix) {
		return "would hide the sandbox user's home " + home
	}
	for _, m := range r.view {
		if within(prefix, m.dest) && m.host != m.dest {
			return fmt.Sprintf("lies beneath %s, where the profile binds %s", m.dest, m.host)
		}
	}
	return ""
}

// sandboxPath puts the directories of the entries the sandbox's own PATH
// would not find first, in the profile's order, and fills in their
// PathDir; "" when no entry needs one.
func (r *resolver) sandboxPath(entries []Entry) string {
	base := filepath.SplitList(r.basePath)
	var seen []string
	for _, d := range base {
		if _, ok := r.visible(d); ok && filepath.IsAbs(d) {
			seen = append(seen, d)
		}
	}
	var first []string
	for i := range entries {
		e := &entries[i]
		if e.Program == "" {
			continue
		}
		if found := lookPath(e.Name, seen); found != "" {
			if chain, err := hops(found); err == nil && chain[len(chain)-1] == e.Program {
				continue
			}
		}
		switch {
		case e.dir == "":
			e.NoPath = "not put on PATH: it is reached through the sandbox's own file"
			continue
		case lookPath(e.Name, []string{e.dir}) == "":
			e.NoPath = "not put on PATH: " + e.dir + " has no " + e.Name + "; the sandbox runs it by its path only"
			continue
		}
		e.PathDir = e.dir
		if !slices.Contains(first, e.dir) {
			first = append(first, e.dir)
		}
	}
	if len(first) == 0 {
		return ""
	}
	out := slices.Clone(first)
	for _, d := range base {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return strings.Join(out, string(filepath.ListSeparator))
}
