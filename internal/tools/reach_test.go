package tools

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

func TestReach(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "a/b"), 0o755)
	os.WriteFile(filepath.Join(ws, "a/b/.env.local"), nil, 0o644)
	os.WriteFile(filepath.Join(ws, "key.pem"), nil, 0o644)
	// A link is its own name: one to a file outside is not that file.
	os.Symlink("/etc/passwd", filepath.Join(ws, "passwd"))
	rules := []pathglob.Rule{{Glob: "**/.env*"}, {Glob: "**/.ssh/**"}, {Suffix: ".pem"}, {Glob: "/etc/**"}, {Prefix: "a/b/"}}
	found, complete := reach(ws, rules)
	if !complete || !slices.Equal(found, []int{0, 2, 4}) {
		t.Errorf("found %v (complete %v), want [0 2 4]", found, complete)
	}
	// Past the bound, every rule counts as found.
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(ws, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), nil, 0o644)
	}
	defer func(n int) { maxReach = n }(maxReach)
	maxReach = 10
	found, complete = reach(ws, rules)
	if complete || len(found) != len(rules) {
		t.Errorf("past the bound: found %v (complete %v)", found, complete)
	}
}
