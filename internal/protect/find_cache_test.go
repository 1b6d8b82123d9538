//go:build linux

package protect

import (
	"os"
	"path/filepath"
	"testing"
)

// A cached search answers as a search would: what is made in the tree
// after the cache was written, deep in a directory untouched since, or in
// a directory closed to cordon then, is found.
func TestSearchInCached(t *testing.T) {
	root := t.TempDir()
	cache := filepath.Join(t.TempDir(), "prefixes", "one")
	must(t, os.MkdirAll(filepath.Dir(cache), 0o700))
	put(t, root+"/lib/python3.11/site-packages/x/__init__.py", "")
	put(t, root+"/etc/pip.conf", "[global]\nindex-url = https://u:token@x/\n")
	s := Search{MaxEntries: 1000, MaxDepth: 16, SameFiles: true}
	names := func() map[string]bool {
		t.Helper()
		found, err := s.InCached(root, cache)
		must(t, err)
		out := map[string]bool{}
		for _, f := range found {
			out[f.Rel] = true
		}
		return out
	}
	if got := names(); !got["etc/pip.conf"] || len(got) != 1 {
		t.Fatalf("first search: %v", got)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Fatalf("no cache kept: %v", err)
	}
	if got := names(); !got["etc/pip.conf"] || len(got) != 1 {
		t.Fatalf("from the cache: %v", got)
	}
	put(t, root+"/lib/python3.11/site-packages/x/.npmrc", "//r/:_authToken=t\n")
	if got := names(); !got["lib/python3.11/site-packages/x/.npmrc"] {
		t.Errorf("a credential made since the cache was written is not found: %v", got)
	}
	must(t, os.Remove(root+"/etc/pip.conf"))
	if got := names(); got["etc/pip.conf"] {
		t.Errorf("a credential removed since is still found: %v", got)
	}
}
