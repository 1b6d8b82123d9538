//go:build !race

// (The race detector's instrumentation allocates.)

package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// Reading a counter file again allocates nothing: the watcher reads them
// every few milliseconds for the whole run, and what it allocated would
// grow an idle cordon's heap.
func TestCountersReadAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 2\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c counters
	defer c.close()
	if _, err := c.keyed(dir, "memory.events", "oom_kill"); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { c.keyed(dir, "memory.events", "oom_kill") }); n != 0 {
		t.Errorf("keyed allocates %v times per read", n)
	}
}
