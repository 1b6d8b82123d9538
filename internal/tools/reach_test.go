package tools

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

func TestReach(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "a/b"), 0o755)
	os.WriteFile(filepath.Join(ws, "a/b/.env.local"), []byte("K=V"), 0o644)
	os.WriteFile(filepath.Join(ws, "key.pem"), []byte("key"), 0o644)
	// An empty file (a placeholder of cordon's, say) has nothing to read.
	os.MkdirAll(filepath.Join(ws, "c/.ssh"), 0o755)
	os.WriteFile(filepath.Join(ws, "c/.ssh/config"), nil, 0o644)
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

// The identities of labelled files are found under any name, in the
// workspace and the other roots; labelled paths are found when they hold
// something.
func TestReachByIdentityAndPath(t *testing.T) {
	ws, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "cfg.txt"), []byte("K=V"), 0o644)
	os.WriteFile(filepath.Join(other, "copy"), []byte("K=V"), 0o644)
	os.WriteFile(filepath.Join(ws, "empty"), nil, 0o644)
	id := func(p string) ID {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return ID{Dev: uint64(st.Dev), Ino: st.Ino}
	}
	ids := []ID{id(filepath.Join(ws, "cfg.txt")), id(filepath.Join(other, "copy")), id(filepath.Join(ws, "empty")), {Dev: 1, Ino: 1}}
	_, found, _, complete := reachAll(ws, []string{other}, nil, ids)
	if !complete || !slices.Equal(found, []int{0, 1}) {
		t.Errorf("identities found %v (complete %v), want [0 1]", found, complete)
	}
	if got := present([]string{filepath.Join(ws, "cfg.txt"), filepath.Join(ws, "empty"), filepath.Join(ws, "gone"), ws}); !slices.Equal(got, []int{0}) {
		t.Errorf("paths present: %v", got)
	}
}
