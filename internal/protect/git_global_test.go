//go:build linux

package protect

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A hooks directory the user's or the system's git configuration names,
// inside the work tree (absolute or relative to it), is protected as the
// repository's own.
func TestGlobalHooksPath(t *testing.T) {
	root, cfg := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(cfg, "gitconfig")
	if err := os.WriteFile(global, []byte("[core]\n\thooksPath = "+root+"/ci/hooks\n[core]\n\thooksPath = local-hooks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := globalConfigs
	globalConfigs = func() []string { return []string{global, filepath.Join(cfg, "absent")} }
	defer func() { globalConfigs = saved }()
	d, err := openRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	g, err := gitPaths(d, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ci/hooks", "local-hooks"} {
		if !slices.Contains(g.paths, want) {
			t.Errorf("%s not protected: %v", want, g.paths)
		}
	}
	if _, beyond := Repos(d, root); !beyond("ci/hooks/pre-commit") {
		t.Error("a hook in the global hooks directory is not reported")
	}
}
