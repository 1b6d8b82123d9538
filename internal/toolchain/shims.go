package toolchain

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// manager is a version manager that puts shims on the PATH: scripts that
// run the selected version's program of the same name.
type manager struct {
	name string
	// root is the variable naming the manager's root, which each shim
	// exports; version selects versions; file is the per-directory
	// version file.
	root, version, file string
}

var managers = []manager{
	{name: "pyenv", root: "PYENV_ROOT", version: "PYENV_VERSION", file: ".python-version"},
	{name: "rbenv", root: "RBENV_ROOT", version: "RBENV_VERSION", file: ".ruby-version"},
	{name: "nodenv", root: "NODENV_ROOT", version: "NODENV_VERSION", file: ".node-version"},
}

// errNotInstalled marks a version a manager selects that is not there.
var errNotInstalled = errors.New("not installed")

// throughManagers turns what the PATH found into the program of the
// toolchain a version manager selects: a shim into the selected version's
// program, a rustup proxy into the selected toolchain's. Anything else is
// the program itself. missing says why nothing runs, when nothing does.
func (r *resolver) throughManagers(found, name string) (prog, via, missing string) {
	if m, root := shimOf(found); m != nil {
		return r.throughShim(m, root, found, name)
	}
	if name != "rustup" && isRustupProxy(found) {
		return r.throughRustup(found, name)
	}
	return found, "", ""
}

// shimOf reports whether the file at p is a version manager's shim: an
// executable script in a directory named shims that exports the manager's
// root. It returns the manager and its root.
func shimOf(p string) (*manager, string) {
	if filepath.Base(filepath.Dir(p)) != "shims" {
		return nil, ""
	}
	text, err := readSmall(p, maxShim, nil)
	if err != nil {
		return nil, ""
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		for i := range managers {
			m := &managers[i]
			v, ok := strings.CutPrefix(line, "export "+m.root+"=")
			if !ok {
				continue
			}
			if root, err := strconv.Unquote(v); err == nil && filepath.IsAbs(root) {
				return m, filepath.Clean(root)
			}
		}
	}
	return nil, ""
}

// throughShim finds the program a shim of m would run: in the first of
// the selected versions that has one, as the manager does. The selection
// is the manager's variable (PYENV_VERSION), else the nearest version file
// (.python-version) from the working directory up, else the root's
// version file; none selects the system's. A name that is not a version
// name (validVersion) is neither followed nor shown.
func (r *resolver) throughShim(m *manager, root, shim, name string) (prog, via, missing string) {
	versions, invalid, from := r.selectedVersions(m, root)
	for _, v := range versions {
		if v == "system" {
			// The system's program: the next one on the PATH, past the
			// manager's shims.
			var dirs []string
			for _, d := range r.hostPath {
				if d != filepath.Dir(shim) && filepath.Base(d) != "shims" {
					dirs = append(dirs, d)
				}
			}
			if p := lookPath(name, dirs); p != "" {
				return p, fmt.Sprintf("%s system, from %s", m.name, from), ""
			}
			continue
		}
		dir, err := versionDir(root, v)
		if err != nil {
			continue
		}
		if p := filepath.Join(dir, "bin", name); executable(p) {
			return p, fmt.Sprintf("%s %s, from %s", m.name, v, from), ""
		}
	}
	if len(versions) == 0 {
		return "", "", fmt.Sprintf("%s: the version named in %s is not a valid version name", m.name, from)
	}
	missing = fmt.Sprintf("%s selects %s (%s), which has no %s installed", m.name, strings.Join(versions, ", "), from, name)
	if invalid {
		missing += "; the other names in " + from + " are not valid version names"
	}
	return "", "", missing
}

// selectedVersions are the versions m selects that are version names,
// whether others were named besides, and where that is said.
func (r *resolver) selectedVersions(m *manager, root string) (versions []string, invalid bool, from string) {
	if v, ok := r.getenv(m.version); ok && strings.TrimSpace(v) != "" {
		versions, invalid = validVersions(strings.FieldsFunc(v, func(c rune) bool { return c == ':' || c == ' ' }))
		return versions, invalid, m.version
	}
	owners := trustedOwners(r.cwd)
	for _, d := range searchDirs(r.cwd, owners) {
		f := filepath.Join(d, m.file)
		if vs := readVersionFile(f, owners); vs != nil {
			versions, invalid = validVersions(vs)
			return versions, invalid, f
		}
	}
	f := filepath.Join(root, "version")
	if vs := readVersionFile(f, nil); vs != nil {
		versions, invalid = validVersions(vs)
		return versions, invalid, f
	}
	return []string{"system"}, false, "no version file"
}

// validVersions keeps the names in vs that are version names, at most
// maxVersions of them, and says whether it left any out.
func validVersions(vs []string) ([]string, bool) {
	var out []string
	invalid := false
	for _, v := range vs {
		switch {
		case !validVersion(v):
			invalid = true
		case len(out) < maxVersions:
			out = append(out, v)
		}
	}
	return out, invalid
}

// readVersionFile reads the versions a version file names, one a word,
// comments left out; nil when there is no such file (a link, a FIFO and
// a file not of owners count as none, see readSmall) or it names none.
func readVersionFile(f string, owners []uint32) []string {
	data, err := readSmall(f, maxVersionFile, owners)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(data, "\n") {
		for _, w := range strings.Fields(line) {
			if strings.HasPrefix(w, "#") {
				break
			}
			out = append(out, w)
		}
	}
	return out
}

// versionDir is the directory of version v under root/versions: v itself,
// or the newest installed version it is a prefix of (3.11 selects 3.11.7
// over 3.11.2). A name that would leave the versions directory is refused:
// version files lie in the workspace, where the sandbox writes.
func versionDir(root, v string) (string, error) {
	base := filepath.Join(root, "versions")
	if v == "" || filepath.IsAbs(v) || filepath.Clean(v) != v || v == "." || v == ".." || strings.HasPrefix(v, "../") {
		return "", fmt.Errorf("version %q: not a version name", v)
	}
	dir := filepath.Join(base, v)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		return "", errNotInstalled
	}
	var matches []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), v+".") {
			matches = append(matches, e.Name())
		}
	}
	if len(matches) == 0 {
		return "", errNotInstalled
	}
	slices.SortFunc(matches, compareVersions)
	return filepath.Join(base, matches[len(matches)-1]), nil
}

// compareVersions orders version names by their dot-separated parts: by
// each part's leading number, then a release (1) after its pre-releases
// (1rc1), then by the rest of the part.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := comparePart(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

func comparePart(a, b string) int {
	na, ra := leadingNumber(a)
	nb, rb := leadingNumber(b)
	switch {
	case na != nb:
		return na - nb
	case ra == rb:
		return 0
	case ra == "":
		return 1
	case rb == "":
		return -1
	}
	return strings.Compare(ra, rb)
}

// leadingNumber splits a version part into its leading number (-1 when
// there is none) and the rest.
func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && i < 9 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1, s
	}
	n, _ := strconv.Atoi(s[:i])
	return n, s[i:]
}
