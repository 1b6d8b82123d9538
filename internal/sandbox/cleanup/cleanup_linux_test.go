package cleanup

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestShared checks what the shared helper removes: nothing of a sandbox
// cordon removed itself; the cgroups of one cordon could not remove at
// once, and its placeholders once cordon is gone; everything of the rest
// when its stdin closes; never a directory cordon did not make.
func TestShared(t *testing.T) {
	var reclaimed, swept []string
	waited := false
	r := registry{
		sandboxes: map[string][]string{},
		reclaim: func(dirs []string, _ time.Time) bool {
			reclaimed = append(reclaimed, dirs...)
			return !slices.Contains(dirs, "/sys/fs/cgroup/pids/cordon-stuck")
		},
		sweep:         func(p []string) { swept = append(swept, p...) },
		waitForCordon: func(time.Time) { waited = true },
	}
	for _, line := range []string{
		"add 1 /sys/fs/cgroup/pids/cordon-1 -- ph1",
		"add 2 /sys/fs/cgroup/pids/cordon-2 /sys/fs/cgroup/memory/cordon-2 -- ph2a ph2b",
		"add 3 /sys/fs/cgroup/pids/cordon-3 -- ph3",
		"add 4 /etc/cordon-4 -- ph4",
		"add 5 /sys/fs/cgroup/pids/cordon-stuck -- ph5",
		"add 6 /sys/fs/cgroup/pids/cordon-6/../../../../etc -- ph6",
		"done 1",
		"failed 2",
		"bogus",
		"done",
	} {
		r.apply(line)
	}
	if want := []string{"/sys/fs/cgroup/pids/cordon-2", "/sys/fs/cgroup/memory/cordon-2"}; !slices.Equal(reclaimed, want) {
		t.Fatalf("before the end, reclaimed %v, want %v", reclaimed, want)
	}
	if len(swept) != 0 || waited {
		t.Fatalf("placeholders swept while cordon runs: %v", swept)
	}
	r.end()
	if !waited {
		t.Error("placeholders swept without waiting for cordon to exit")
	}
	slices.Sort(swept)
	if want := []string{"ph2a", "ph2b", "ph3"}; !slices.Equal(swept, want) {
		t.Errorf("swept %v, want %v (not a done sandbox's, not one still there, not one whose directories are not cordon's)", swept, want)
	}
	for _, d := range reclaimed {
		if strings.Contains(d, "/etc") || strings.Contains(d, "cordon-1") {
			t.Errorf("reclaimed %s", d)
		}
	}
	if !slices.Contains(reclaimed, "/sys/fs/cgroup/pids/cordon-3") {
		t.Errorf("a sandbox left at the end was not reclaimed: %v", reclaimed)
	}
}
