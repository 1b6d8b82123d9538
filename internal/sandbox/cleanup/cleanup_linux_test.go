package cleanup

import (
	"io"
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

// TestSharedLineTooLong: a line over MaxLine stops what the helper is told,
// but the sandboxes it watches are reclaimed only once cordon has gone
// (stdin closed), not while cordon still runs them.
func TestSharedLineTooLong(t *testing.T) {
	reclaimed := make(chan []string, 4)
	r := registry{
		sandboxes:     map[string][]string{},
		reclaim:       func(dirs []string, _ time.Time) bool { reclaimed <- dirs; return true },
		sweep:         func([]string) {},
		waitForCordon: func(time.Time) {},
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() { r.serve(pr); close(done) }()
	written := make(chan struct{})
	go func() {
		io.WriteString(pw, "add 1 /sys/fs/cgroup/pids/cordon-1 -- ph1\n")
		io.WriteString(pw, strings.Repeat("x", MaxLine+1)+"\n")
		io.WriteString(pw, "add 2 /sys/fs/cgroup/pids/cordon-2 -- ph2\n")
		close(written)
	}()
	select {
	case d := <-reclaimed:
		t.Fatalf("reclaimed %v while cordon still runs", d)
	case <-done:
		t.Fatal("the helper ended while cordon still runs")
	case <-written: // every byte read: the helper still listens
	}
	select {
	case d := <-reclaimed:
		t.Fatalf("reclaimed %v while cordon still runs", d)
	default:
	}
	pw.Close()
	<-done
	if d := <-reclaimed; !slices.Equal(d, []string{"/sys/fs/cgroup/pids/cordon-1"}) {
		t.Errorf("reclaimed %v at the end", d)
	}
}
