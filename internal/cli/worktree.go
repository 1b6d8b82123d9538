package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// maxRepoDepth bounds how many directories above the current one are
// looked at for the top of a git work tree.
const maxRepoDepth = 64

// repoWorkspace widens the embedded default profile's workspace, the
// current directory, to the top of the git work tree holding it, and
// returns the command's working directory relative to that top ("" when
// nothing changed): git in a sandbox started from a subdirectory then finds
// its repository, as it would outside. --workspace, or a profile file
// (whose workspace is what it says, as its approval and the gateway's
// resolver read it), keeps the workspace as given.
func repoWorkspace(e *env, pf *profileFlags, p *profile.Profile) string {
	if pf.file != "" || pf.workspace != "" || p.Workspace.Path != "." || p.Workspace.Target != "" {
		return ""
	}
	top, ok := workTreeTop(e.cwd, protect.Homes())
	if !ok || top == e.cwd {
		return ""
	}
	rel, err := filepath.Rel(top, e.cwd)
	if err != nil || !filepath.IsLocal(rel) {
		return ""
	}
	if protect.Sensitive(top) != "" {
		// A home directory, or one holding credentials, is no writable
		// workspace: the current directory is, as it was.
		return ""
	}
	p.Workspace.Path = top
	fmt.Fprintf(e.stderr, "cordon: workspace %s, the git repository around the current directory (--workspace . takes the current directory alone)\n", termsafe.Line(top))
	return rel
}

// workTreeTop finds the top of the git work tree holding dir: the nearest
// directory, dir itself or above, that holds .git (a directory, or a file
// as in a linked work tree or a submodule). The way up is read, never git
// run: git would obey the configuration of what it finds. As git does
// without GIT_DISCOVERY_ACROSS_FILESYSTEM, it stops at a file system's
// edge; it never goes above a home directory, and a top that would be a
// home directory or / is none.
func workTreeTop(dir string, homes []string) (string, bool) {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) {
		return "", false
	}
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil {
		return "", false
	}
	dev := st.Dev
	for range maxRepoDepth {
		home := slices.Contains(homes, dir)
		if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
			if home || dir == "/" {
				return "", false
			}
			return dir, true
		}
		parent := filepath.Dir(dir)
		if home || parent == dir {
			return "", false
		}
		if syscall.Stat(parent, &st) != nil || st.Dev != dev {
			return "", false
		}
		dir = parent
	}
	return "", false
}
