package protect

import (
	"slices"
	"strings"
)

// Protected reports whether rel, a slash-separated path relative to a
// workspace's root, is one the host's tools run or obey: one of Defaults
// is a component of it at any depth (a submodule's .git, a nested
// .vscode), its last name is one of IfPresent, or it is in a .husky or
// .github/workflows directory, or is one. A change set flags such a path
// for review.
func Protected(rel string) bool {
	names := strings.Split(rel, "/")
	for i, n := range names {
		if slices.Contains(Defaults, n) || n == ".husky" {
			return true
		}
		if n == ".github" && i+1 < len(names) && names[i+1] == "workflows" {
			return true
		}
	}
	last := names[len(names)-1]
	switch {
	case slices.Contains(IfPresent, last):
		return true
	case strings.HasSuffix(last, ".code-workspace"):
		// An editor's workspace file runs its tasks when opened.
		return true
	case strings.HasSuffix(last, ".pth"), last == "sitecustomize.py", last == "usercustomize.py", last == "pyvenv.cfg":
		// Python runs these whenever the interpreter of the environment
		// they are in starts (an editor's Python support, a test run).
		return true
	case len(names) > 1 && names[len(names)-2] == "bin" && strings.HasPrefix(strings.ToLower(last), "activate"):
		// A virtual environment's activation scripts, sourced by shells
		// and direnv.
		return true
	}
	return false
}
