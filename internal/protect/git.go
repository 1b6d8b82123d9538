package protect

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/obey"
)

// gits are a bind's git directories (only pinned in place) and the paths in
// and around them that git obeys; beyond are those of paths that are not a
// repository's own (see Repos).
type gits struct {
	dirs, paths, beyond []string
}

// Bounds of the search for repositories in a bind: planning cannot be made
// to take long, and a bind with more than cordon protects is refused rather
// than half protected.
const (
	maxGitDirs  = 128  // repositories: the main one, submodules', a separate git dir
	maxGitWalk  = 2048 // directories looked at under .git/modules and .git/worktrees
	maxGitDepth = 8    // levels under .git/modules (submodule names may hold /)
)

// errTooManyGits reports a bind beyond those bounds.
var errTooManyGits = fmt.Errorf("more than %d repositories, %d directories or %d levels under .git/modules and .git/worktrees: cordon cannot protect the hooks and configuration of them all; remove the repositories no submodule or worktree uses", maxGitDirs, maxGitWalk, maxGitDepth)

// fileGhosts are the paths in a git directory whose placeholder is a file
// git reads as harmless, not a directory (git refuses to work where it finds
// a directory there): commondir naming the git directory itself, an empty
// per-worktree configuration.
var fileGhosts = map[string]string{"commondir": ".\n", "config.worktree": ""}

// gitFile reports whether rel is a file of a git directory (in dirs) that
// takes a file placeholder.
func gitFile(rel string, dirs map[string]bool) bool {
	_, ok := fileGhosts[path.Base(rel)]
	return ok && dirs[path.Dir(rel)]
}

// gitPaths finds what git obeys in the bind: in its repository (.git, or
// the directory a .git file names inside the bind), in every submodule's
// repository (those .git/modules holds, at any depth, and those .gitmodules
// declares, made or not), in each linked worktree's administrative
// directory, each submodule's .git file, and a hooks directory that
// core.hooksPath names in the work tree.
//
// root is the work tree's path on the host, for the absolute paths git
// configuration may hold; links on the way to what the configuration
// names are followed as git would, inside the work tree only.
func gitPaths(d *os.File, root string) (gits, error) {
	var g gits
	repo := func(dir string) error {
		if len(g.dirs) >= maxGitDirs {
			return errTooManyGits
		}
		g.dirs = append(g.dirs, dir)
		g.paths = append(g.paths, dir, dir+"/hooks", dir+"/config", dir+"/info/attributes", dir+"/commondir")
		if v := configValues(d, dir+"/config", "extensions", "worktreeconfig"); len(v) > 0 && strings.EqualFold(v[len(v)-1], "true") {
			g.paths = append(g.paths, dir+"/config.worktree")
		} else if k, _ := lstat(d, dir+"/config.worktree"); k != kindNone {
			g.paths = append(g.paths, dir+"/config.worktree")
		}
		return nil
	}
	// The root may itself be a git directory (a bare repository as the
	// bind): git takes it before any .git above. A HEAD that is a
	// directory (a placeholder: the root can become no repository) is none.
	if k, _ := lstat(d, "HEAD"); k == kindFile || k == kindLink || k == kindMultiLink {
		for _, n := range obey.GitObeyed {
			g.paths = append(g.paths, n)
			g.beyond = append(g.beyond, n)
		}
	}
	main := ".git"
	switch k, _ := lstat(d, ".git"); k {
	case kindFile, kindMultiLink:
		// A .git file: the repository is where it says; inside the bind,
		// it is protected as .git would be.
		main = ""
		if target, ok := gitdirOf(d, root, ".git"); ok {
			main, _ = follow(d, root, target)
			// (a repository outside the bind, or past the bounds: the
			// .git file itself stays protected)
		}
	case kindLink:
		// A link to a repository elsewhere in the bind (as repo lays
		// work trees out): protected where it leads.
		main, _ = follow(d, root, ".git")
	}
	if main != "" {
		if err := repo(main); err != nil {
			return g, err
		}
		walked := 0
		var walk func(dir string, depth int) error
		walk = func(dir string, depth int) error {
			for _, n := range names(d, dir, maxGitWalk+1) {
				if walked++; walked > maxGitWalk {
					return errTooManyGits
				}
				sub := dir + "/" + n
				if k, _ := lstat(d, sub); k != kindDir {
					continue
				}
				if k, _ := lstat(d, sub+"/HEAD"); k == kindFile {
					if err := repo(sub); err != nil {
						return err
					}
				}
				if depth+1 >= maxGitDepth {
					if len(names(d, sub, 1)) > 0 {
						return errTooManyGits
					}
					continue
				}
				if err := walk(sub, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(main+"/modules", 0); err != nil {
			return g, err
		}
		for _, n := range names(d, main+"/worktrees", maxGitDirs+1) {
			if len(g.paths) > 8*maxGitDirs {
				return g, errTooManyGits
			}
			wt := main + "/worktrees/" + n
			g.paths = append(g.paths, wt+"/commondir", wt+"/gitdir")
			if k, _ := lstat(d, wt+"/config.worktree"); k != kindNone {
				g.paths = append(g.paths, wt+"/config.worktree")
			}
		}
		// Declared submodules: their repositories, made or still to be
		// made, and their work trees' .git files.
		for _, name := range configSubsections(d, ".gitmodules", "submodule") {
			if clean := path.Clean(name); clean == name && !strings.HasPrefix(name, "../") && name != ".." && !path.IsAbs(name) {
				if err := repo(main + "/modules/" + name); err != nil {
					return g, err
				}
			}
		}
		for _, sp := range configValues(d, ".gitmodules", "submodule", "path") {
			g.paths = append(g.paths, sp+"/.git")
			g.beyond = append(g.beyond, sp+"/.git")
		}
		seen := map[string]bool{}
		for _, hp := range append(globalHooksPaths(), hooksPaths(d, main+"/config")...) {
			if seen[hp] {
				continue
			}
			if seen[hp] = true; len(seen) > maxHooksPaths {
				return g, errTooManyLinks
			}
			rel, ok := inRoot(root, "", hp)
			if !ok {
				continue
			}
			to, err := follow(d, root, rel)
			switch {
			case errors.Is(err, errTooManyLinks):
				return g, err
			case err == nil:
				rel = to
			}
			g.paths = append(g.paths, rel)
			g.beyond = append(g.beyond, rel)
		}
	}
	return g, nil
}

// gitdirOf reads the "gitdir: PATH" of a .git file, relative to the bind's
// root (root, on the host, for an absolute one); ok is false when it names
// a place outside the bind.
func gitdirOf(d *os.File, root, rel string) (string, bool) {
	b := readSmall(d, rel, 4096)
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", false
	}
	return inRoot(root, path.Dir(rel), strings.TrimSpace(v))
}

// inRoot makes p, a path git read from a file of the work tree at root
// (absolute, or relative to dir), relative to root; ok is false when it is
// outside.
func inRoot(root, dir, p string) (string, bool) {
	if p == "" {
		return "", false
	}
	if path.IsAbs(p) {
		r := strings.TrimSuffix(path.Clean(root), "/") + "/"
		if root == "" || !strings.HasPrefix(path.Clean(p)+"/", r) {
			return "", false
		}
		p = strings.TrimPrefix(path.Clean(p), strings.TrimSuffix(r, "/"))
		p = strings.TrimPrefix(p, "/")
		if p == "" {
			p = "."
		}
	} else {
		p = path.Join(dir, p)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

// Bounds of following links: hops on one path, as the kernel allows, and
// links read in all for it (each hop starts again from the root).
const (
	maxHops      = 40
	maxReadlinks = 4096
	// maxHooksPaths bounds the distinct core.hooksPath values looked at.
	maxHooksPaths = 64
)

// errTooManyLinks reports configuration past the bounds of following it.
var errTooManyLinks = fmt.Errorf("more than %d core.hooksPath values, or a path to one past %d links or %d link reads: cordon cannot protect where they lead; simplify the git configuration", maxHooksPaths, maxHops, maxReadlinks)

// errOutside reports a link leading out of the work tree.
var errOutside = errors.New("leads outside the work tree")

// follow resolves the links on the way to rel under d, as the work tree at
// root sees them: errOutside when one leads outside it, errTooManyLinks
// past the bounds (what cannot be followed cannot be protected where it leads).
func follow(d *os.File, root, rel string) (string, error) {
	parts := strings.Split(path.Clean(rel), "/")
	done := ""
	for hops, reads := 0, 0; len(parts) > 0; {
		next := path.Join(done, parts[0])
		parts = parts[1:]
		if reads++; reads > maxReadlinks {
			return "", errTooManyLinks
		}
		target, isLink := readlink(d, next)
		if !isLink {
			done = next
			continue
		}
		if hops++; hops > maxHops {
			return "", errTooManyLinks
		}
		to, ok := inRoot(root, done, target)
		if !ok {
			return "", errOutside
		}
		parts = append(strings.Split(to, "/"), parts...)
		done = ""
	}
	if done == "" {
		done = "."
	}
	return done, nil
}

// hooksPaths reads core.hooksPath from the configuration at rel, every
// value it sets: a hooks directory inside the work tree (as hook managers
// such as husky set) is protected as .git/hooks is. Only the file itself
// is read, not its includes.
func hooksPaths(d *os.File, rel string) []string {
	return configValues(d, rel, "core", "hookspath")
}

// globalConfigs are the configuration files of the user running cordon and
// of the system, which git reads before a repository's own; tests change
// it.
var globalConfigs = func() []string {
	var out []string
	home, _ := os.UserHomeDir()
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		out = append(out, path.Join(x, "git/config"))
	} else if home != "" {
		out = append(out, path.Join(home, ".config/git/config"))
	}
	if home != "" {
		out = append(out, path.Join(home, ".gitconfig"))
	}
	return append(out, "/etc/gitconfig")
}

// globalHooksPaths are the values of core.hooksPath the user's and the
// system's configuration set, with ~ expanded: a repository without its
// own obeys them.
func globalHooksPaths() []string {
	var out []string
	for _, f := range globalConfigs() {
		dir, err := os.Open(path.Dir(f))
		if err != nil {
			continue
		}
		out = append(out, configValues(dir, path.Base(f), "core", "hookspath")...)
		dir.Close()
	}
	for i, v := range out {
		if rest, ok := strings.CutPrefix(v, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				out[i] = path.Join(home, rest)
			}
		}
	}
	return out
}

// configValues reads the values of key in every section named section
// ([section] or [section "name"]) of the git configuration file rel under
// d: the syntax git writes (a key on a line of its own or after the
// section's header on the same line; comments after ; or #), no includes,
// at most 1 MiB.
func configValues(d *os.File, rel, section, key string) []string {
	var out []string
	forConfig(d, rel, func(sec, _, k, v string) {
		if sec == section && strings.EqualFold(k, key) {
			out = append(out, v)
		}
	})
	return out
}

// configSubsections lists the names of the [section "name"] headers of the
// file rel.
func configSubsections(d *os.File, rel, section string) []string {
	var out []string
	seen := map[string]bool{}
	forConfig(d, rel, func(sec, sub, _, _ string) {
		if sec == section && sub != "" && !seen[sub] {
			seen[sub] = true
			out = append(out, sub)
		}
	})
	return out
}

// forConfig calls f with each key and value of the configuration file rel,
// and the section and subsection they are in.
func forConfig(d *os.File, rel string, f func(section, sub, key, value string)) {
	section, sub := "", ""
	for _, line := range strings.Split(string(readSmall(d, rel, 1<<20)), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			end := strings.Index(line, "]")
			if end < 0 {
				continue
			}
			header := line[1:end]
			name, rest, _ := strings.Cut(header, " ")
			section, sub = strings.ToLower(strings.TrimSpace(name)), strings.Trim(strings.TrimSpace(rest), `"`)
			if i := strings.Index(name, "."); i >= 0 { // [section.sub]
				section, sub = strings.ToLower(name[:i]), name[i+1:]
			}
			line = strings.TrimSpace(line[end+1:])
		}
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			if end := strings.Index(v[1:], `"`); end >= 0 {
				v = v[1 : end+1]
			}
		} else if i := strings.IndexAny(v, ";#"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		f(section, sub, strings.TrimSpace(k), v)
	}
}

// Repos says, for the work tree open at d, what git obeys beyond the names
// Protected knows, for a caller that judges what is inside a repository
// itself, path by path (package changes, with obey.JudgeGit): dirs are the
// directories of the repositories git uses (a .git, the one a .git file or
// link names, the submodules'), and beyond reports the paths git obeys
// other than a repository's own (a hooks directory core.hooksPath names,
// even inside a repository; a submodule's .git file; the root's files git
// obeys when the root is itself a git directory). Past the bounds of the
// search, dirs is empty and every path is beyond.
func Repos(d *os.File, root string) (dirs []string, beyond func(rel string) bool) {
	g, err := gitPaths(d, root)
	if err != nil {
		return nil, func(string) bool { return true }
	}
	return g.dirs, underAny(g.beyond)
}

// underAny reports whether a path is one of paths or under one.
func underAny(paths []string) func(rel string) bool {
	return func(rel string) bool {
		for _, p := range paths {
			if rel == p || strings.HasPrefix(rel, p+"/") {
				return true
			}
		}
		return false
	}
}
