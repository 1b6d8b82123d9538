package compat_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// workload is one script of testdata/workloads and what it needs.
type workload struct {
	name string
	// needs are commands the host must have; without one, the workload is
	// skipped.
	needs []string
	// allow are the destinations passed to cordon with --allow; "INDEX"
	// stands for the address of the package index the test serves.
	allow []string
	// reach is a URL the host itself must reach first; when it cannot, the
	// workload is skipped.
	reach string
	// egress: every allowed destination must show an allowed connection in
	// cordon's outcome (the workload went through the allowlist).
	egress bool
	// tty runs the workload on a terminal (script(1)), typing input at it.
	tty   bool
	input string
	// setup names the host-side script (testdata/workloads/SETUP.setup.sh)
	// that prepares the workspace, as the workspace's owner; "" for none.
	setup string
	// gocache starts the workload with a Go build cache in its workspace
	// ($GOCACHE) holding the standard packages it uses, compiled once on
	// the host (testdata/gowarm), so that each column does not compile
	// the standard library again.
	gocache bool
}

// workloads are the suite, in the order of the table.
var workloads = []workload{
	{name: "git", needs: []string{"git"}, setup: "git"},
	{name: "git-init", needs: []string{"git"}},
	{name: "git-clean", needs: []string{"git"}, setup: "git"},
	{name: "files", needs: []string{"python3"}},
	{name: "python-venv-pip", needs: []string{"python3"}, allow: []string{"INDEX"}, egress: true},
	{name: "python-sqlite-wal", needs: []string{"python3"}},
	{name: "python-multiprocessing", needs: []string{"python3"}},
	{name: "node-npm", needs: []string{"node", "npm"}, allow: []string{"registry.npmjs.org:443"}, reach: "https://registry.npmjs.org/is-odd", egress: true},
	{name: "node-fs", needs: []string{"node"}},
	{name: "node-devserver", needs: []string{"node", "curl"}},
	// Only turns cordon's egress proxy on, as any allowed destination does:
	// the registry is never contacted.
	{name: "devserver-with-egress", needs: []string{"python3", "curl"}, allow: []string{"registry.npmjs.org:443"}},
	{name: "go-module", needs: []string{"go"}, allow: []string{"proxy.golang.org:443"}, reach: "https://proxy.golang.org/github.com/google/uuid/@v/v1.6.0.info", egress: true, gocache: true},
	{name: "c-make", needs: []string{"make", "gcc", "ar"}},
	{name: "archives", needs: []string{"tar", "gzip", "bzip2", "xz", "python3"}},
	{name: "pipeline", needs: []string{"bash", "xargs", "find", "awk"}},
	{name: "tty", needs: []string{"script", "python3"}, tty: true, input: "typed at the terminal\n"},
}

// known are cordon's own failures, known and not fixed yet: the workload,
// a line its output shows when it fails that way, and the cause. A known
// failure keeps the suite green; a workload listed here that passes under
// cordon fails it, so that the list follows the fixes.
var known = map[string]struct{ shows, cause string }{
	"git-init": {
		shows: "not a git repository: /dev/null/.git-kept-by-cordon",
		cause: "by design: in a workspace that is not a repository, .git is a read-only placeholder (a .git file naming no repository, where git stops), so that the sandbox cannot make up a repository whose hooks and configuration the host's git would obey (docs/THREATS.md, 48); a profile opens it with workspace.unprotect, and a reviewed workspace lets git init land",
	},
	"git-clean": {
		shows: "Device or resource busy",
		cause: "cordon's placeholders for the protected paths a repository lacks (.vscode, .idea, .claude, .mcp.json, ...) are mount points; the sandbox's git ignores them (core.excludesFile), so git clean -fd works, but git clean -fdx removes ignored files too, tries them and exits 1",
	},
}

// script reads a workload's script, and the host-side setup that prepares
// its workspace, if it has one.
func script(w workload) (body, setup []byte, err error) {
	body, err = os.ReadFile(filepath.Join("testdata", "workloads", w.name+".sh"))
	if err != nil || w.setup == "" {
		return body, nil, err
	}
	setup, err = os.ReadFile(filepath.Join("testdata", "workloads", w.setup+".setup.sh"))
	return body, setup, err
}

// TestWorkloadsDocumented checks that every script is in the suite and says
// what it proves.
func TestWorkloadsDocumented(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "workloads", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range workloads {
		names = append(names, w.name)
		body, _, err := script(w)
		if err != nil {
			t.Errorf("%s: %v", w.name, err)
			continue
		}
		if !strings.HasPrefix(string(body), "# proves: ") {
			t.Errorf("%s.sh does not begin with a comment saying what it proves (# proves: ...)", w.name)
		}
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sh")
		if strings.HasSuffix(name, ".setup") {
			if !slices.ContainsFunc(workloads, func(w workload) bool { return w.setup+".setup" == name }) {
				t.Errorf("%s is the setup of no workload", f)
			}
			continue
		}
		if !slices.Contains(names, name) {
			t.Errorf("%s is not in the suite (workloads in workloads_test.go)", f)
		}
	}
	for name := range known {
		if !slices.Contains(names, name) {
			t.Errorf("known failure of %s, which is not in the suite", name)
		}
	}
}
