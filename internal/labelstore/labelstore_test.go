package labelstore

import (
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// Labels outlive their gateway, and the gateways of one workspace merge
// what they save; another workspace's are another file.
func TestLabelsPersistAndMerge(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir, "/work/app")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, path := range []string{"/work/app/notes/a", "/work/app/notes/b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := toolpolicy.NewFileLabels()
			f.Merge([]toolpolicy.FileEntry{{Path: path, Labels: []string{"secret"}}, {Dev: 1, Ino: uint64(10 + i), ByID: true, Labels: []string{"pii"}}}, nil)
			if err := a.Save(f); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	later := toolpolicy.NewFileLabels()
	if err := a.Load(later); err != nil {
		t.Fatal(err)
	}
	entries, _ := later.Entries()
	var paths []string
	for _, e := range entries {
		if !e.ByID {
			paths = append(paths, e.Path)
		}
	}
	if len(entries) != 4 || !slices.Equal(paths, []string{"/work/app/notes/a", "/work/app/notes/b"}) {
		t.Errorf("loaded %+v", entries)
	}
	b, err := Open(dir, "/work/other")
	if err != nil {
		t.Fatal(err)
	}
	other := toolpolicy.NewFileLabels()
	if err := b.Load(other); err != nil || other.Len() != 0 {
		t.Errorf("another workspace: %d entries, %v", other.Len(), err)
	}
	// A store that cannot be read is an error, never an empty one.
	os.WriteFile(a.Path(), []byte("{"), 0o600)
	if err := a.Load(toolpolicy.NewFileLabels()); err == nil {
		t.Error("a broken store loaded")
	}
}
