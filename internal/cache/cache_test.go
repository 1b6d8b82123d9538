package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/du"
)

func TestExpand(t *testing.T) {
	all, err := Expand([]string{Auto})
	if err != nil || len(all) != len(Catalog) {
		t.Fatalf("auto: %v, %v", all, err)
	}
	some, err := Expand([]string{"npm", "go"})
	if err != nil || len(some) != 2 || some[0].Name != "go" || some[1].Name != "npm" {
		t.Fatalf("[npm, go] = %v, %v; want go then npm, in the catalog's order", some, err)
	}
	if _, err := Expand([]string{"maven"}); err == nil || !strings.Contains(err.Error(), `"maven"`) {
		t.Fatalf("an unknown cache: %v", err)
	}
}

func TestPlanBindsAndEnv(t *testing.T) {
	s, err := Open("/state/caches", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	kinds, _ := Expand([]string{"go"})
	p := &Plan{Store: s, Kinds: kinds}
	want := []Bind{{"/state/caches/agent-1/go/build", Inside + "/go/build"}, {"/state/caches/agent-1/go/mod", Inside + "/go/mod"}}
	if got := p.Binds(); !slices.Equal(got, want) {
		t.Fatalf("binds %v, want %v", got, want)
	}
	env := []string{"GOCACHE=" + Inside + "/go/build", "GOMODCACHE=" + Inside + "/go/mod"}
	if got := p.Env(); !slices.Equal(got, env) {
		t.Fatalf("env %v, want %v", got, env)
	}
	npm, _ := Expand([]string{"npm"})
	off := &Plan{Store: s, Kinds: npm, Offline: true}
	if got := off.Env(); !slices.Contains(got, "npm_config_prefer_offline=true") {
		t.Fatalf("offline npm: env %v", got)
	}
	off.Offline = false
	if got := off.Env(); slices.Contains(got, "npm_config_prefer_offline=true") {
		t.Fatalf("npm with a network: env %v", got)
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if _, err := Open("/state", bad); err == nil {
			t.Errorf("Open(%q) made a store", bad)
		}
	}
}

// write makes a file of n bytes at path, and its directories.
func write(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestClearFollowsNothingAndRemovesWhatOwnersLockedAway(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(root, "a")
	kinds, _ := Expand([]string{"go", "npm"})
	if err := s.Prepare(kinds); err != nil {
		t.Fatal(err)
	}
	// Outside the caches: what a link in them names must survive.
	outside := t.TempDir()
	write(t, filepath.Join(outside, "keep"), 10)
	mod := filepath.Join(root, "a", "go", "mod")
	write(t, filepath.Join(mod, "m@v1", "f.go"), 100)
	if err := os.Symlink(outside, filepath.Join(mod, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(mod, "m@v1", "dirlink")); err != nil {
		t.Fatal(err)
	}
	// Go's module cache makes its directories read-only; a sandbox may
	// make one unreadable.
	os.Chmod(filepath.Join(mod, "m@v1"), 0o555)
	write(t, filepath.Join(mod, "locked", "x"), 10)
	os.Chmod(filepath.Join(mod, "locked"), 0)
	write(t, filepath.Join(root, "a", "npm", "cache", "y"), 10)

	cleared, err := s.Clear([]string{"go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cleared) != 1 || cleared[0].Name != "go" || cleared[0].Bytes == 0 {
		t.Fatalf("cleared %+v", cleared)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Fatalf("a file a link in the cache named was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a", "go")); !os.IsNotExist(err) {
		t.Fatalf("the go cache is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a", "npm", "cache", "y")); err != nil {
		t.Fatalf("the npm cache, not named, went too: %v", err)
	}
	left, _ := os.ReadDir(filepath.Join(root, "a"))
	for _, e := range left {
		if strings.HasPrefix(e.Name(), leftoverPrefix) {
			t.Fatalf("a leftover of the clear: %s", e.Name())
		}
	}
}

func TestTrimClearsTheLeastRecentlyUsedFirst(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(root, "a")
	kinds, _ := Expand([]string{"go", "npm", "pip"})
	if err := s.Prepare(kinds); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "a", "go", "build", "big"), 3<<20)
	write(t, filepath.Join(root, "a", "npm", "cache", "big"), 3<<20)
	write(t, filepath.Join(root, "a", "pip", "cache", "small"), 4096)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(root, "a", "npm"), old, old) // npm least recently used
	os.Chtimes(filepath.Join(root, "a", "pip"), old.Add(time.Minute), old.Add(time.Minute))

	cleared, err := s.Trim(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(cleared) != 1 || cleared[0].Name != "npm" {
		t.Fatalf("cleared %+v, want npm alone (the least recently used, and enough)", cleared)
	}
	if cleared, err := s.Trim(4 << 20); err != nil || len(cleared) != 0 {
		t.Fatalf("a second trim within the size cleared %+v (%v)", cleared, err)
	}
	u, err := s.Use(du.Bound{})
	if err != nil || u.Bytes > 4<<20 {
		t.Fatalf("after the trim: %+v, %v", u, err)
	}
	// Past the size alone, the most recently used goes too.
	cleared, err = s.Trim(1 << 20)
	if err != nil || len(cleared) != 2 {
		t.Fatalf("trim to 1 MiB cleared %+v (%v), want pip and go", cleared, err)
	}
}

func TestRecord(t *testing.T) {
	s, _ := Open(t.TempDir(), "a")
	if _, ok := s.Recorded(); ok {
		t.Fatal("a record before any run")
	}
	os.MkdirAll(s.Dir, 0o700)
	if err := s.Record(du.Use{Bytes: 5, Inodes: 2}); err != nil {
		t.Fatal(err)
	}
	if u, ok := s.Recorded(); !ok || u.Bytes != 5 || u.Inodes != 2 {
		t.Fatalf("recorded %+v %v", u, ok)
	}
	if _, err := s.Clear(nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Recorded(); ok {
		t.Fatal("a clear kept the record of what the caches held before it")
	}
}
