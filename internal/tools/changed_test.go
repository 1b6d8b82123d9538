package tools

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// changedSince names the files changed since a time, and no other; past
// its bound of files it says it did not see everything; a root that is
// not there holds nothing.
func TestChangedSince(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "a"), 0o755)
	os.WriteFile(filepath.Join(ws, "old"), []byte("x"), 0o644)
	time.Sleep(3 * SettleMargin)
	since := time.Now()
	os.WriteFile(filepath.Join(ws, "a/new"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(ws, "new2"), []byte("x"), 0o644)
	files, complete := changedSince([]string{ws, filepath.Join(ws, "missing")}, since.Add(-SettleMargin), 10)
	if !complete || len(files) != 2 {
		t.Fatalf("%+v %v", files, complete)
	}
	for _, f := range files {
		if filepath.Base(f.Path) == "old" {
			t.Errorf("an older file named: %+v", f)
		}
	}
	if files, complete := changedSince([]string{ws}, since.Add(-SettleMargin), 1); complete || len(files) != 1 {
		t.Errorf("past the bound: %+v %v", files, complete)
	}
}
