package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// canTrace skips when this process may not trace its children (a
// container without ptrace).
func canTrace(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if _, err := traceRun([]string{"/bin/true"}); err != nil {
		t.Skipf("cannot trace here: %v", err)
	}
}

func TestTraceRunEachProcess(t *testing.T) {
	canTrace(t)
	// The shell starts a background child and waits for it: the child is
	// waited for by its parent, not by the tracer, and still counted.
	procs, err := traceRun([]string{"sh", "-c", "true & /bin/true; wait"})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, p := range procs {
		names[p.name]++
		if p.minflt <= 0 {
			t.Errorf("%s (pid %d): %d minor faults, want > 0", p.name, p.pid, p.minflt)
		}
		if p.rssKiB <= 0 {
			t.Errorf("%s (pid %d): peak RSS %d KiB, want > 0", p.name, p.pid, p.rssKiB)
		}
	}
	// sh, its background subshell, and /bin/true run in a child of its own.
	if names["sh"] != 2 || names["true"] != 1 || len(procs) != 3 {
		t.Errorf("processes %+v, want sh twice and true once", procs)
	}
	if procs[0].name != "sh" {
		t.Errorf("first process %q, want the shell", procs[0].name)
	}
}

func TestRunUsageCountsOrphans(t *testing.T) {
	undo, err := subreaper()
	if err != nil {
		t.Skip(err)
	}
	defer undo()
	// The shell leaves a child behind when it ends: it is orphaned to
	// this process, and its figures count in the run's.
	cmd := exec.Command("sh", "-c", "(/bin/true; /bin/true) & exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	alone := runUsage(cmd)
	u := alone
	if err := reapOrphans(&u); err != nil {
		t.Fatal(err)
	}
	if alone.minflt <= 0 || alone.rssKiB <= 0 {
		t.Errorf("the shell's own run: %+v, want faults and memory", alone)
	}
	if u.minflt <= alone.minflt {
		t.Errorf("with its orphan: %d faults, want more than the shell's %d", u.minflt, alone.minflt)
	}
}

func TestPerProcessMatchesRuns(t *testing.T) {
	runs := [][]proc{
		{{name: "cordon", usage: usage{100, 2048}}, {name: "cordon __init", usage: usage{50, 1024}}, {name: "true", usage: usage{10, 512}}},
		{{name: "cordon", usage: usage{300, 4096}}, {name: "cordon __init", usage: usage{70, 1024}}, {name: "true", usage: usage{30, 512}}, {name: "true", usage: usage{5, 256}}},
		{{name: "cordon", usage: usage{200, 3072}}, {name: "cordon __init", usage: usage{60, 2048}}, {name: "true", usage: usage{20, 512}}},
	}
	got := perProcess(runs)
	want := []procRow{
		{"cordon", 3, usage{200, 3072}},
		{"cordon __init", 3, usage{60, 1024}},
		{"true", 3, usage{20, 512}},
		{"true", 1, usage{5, 256}},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestProcTable(t *testing.T) {
	var w bytes.Buffer
	procTable(&w, "/bin/true", []string{"bare", "cordon"}, map[string][]procRow{
		"bare":   {{"true", 3, usage{40, 1024}}},
		"cordon": {{"cordon", 3, usage{2410, 10240}}, {"cordon __init", 2, usage{900, 5120}}},
	}, 3)
	out := w.String()
	for _, line := range []string{
		"### Processes of one run: `/bin/true`",
		"| tool | process | minor faults | peak RSS MiB |",
		"| bare | true | 40 | 1.0 |",
		"| bare | all 1 | 40 | 1.0 |",
		"| cordon | cordon | 2410 | 10.0 |",
		"| cordon | cordon __init (in 2 of 3 runs) | 900 | 5.0 |",
		"| cordon | all 2 | 3310 | 15.0 |",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
	w.Reset()
	procTable(&w, "/bin/true", nil, nil, 3)
	if w.Len() != 0 {
		t.Errorf("no tools: %q, want nothing", w.String())
	}
}

func TestStartupTable(t *testing.T) {
	tools := []tool{{name: "bare"}, {name: "bwrap"}, {name: "cordon"}, {name: "firejail"}}
	ms := time.Millisecond
	res := map[string][]time.Duration{
		"bare":   {1 * ms, 2 * ms, 3 * ms},
		"bwrap":  {8 * ms, 8 * ms, 8 * ms},
		"cordon": {30 * ms, 32 * ms, 31 * ms},
	}
	used := map[string][]usage{
		"bare":   {{40, 99999}, {60, 99999}, {50, 99999}},
		"bwrap":  {{126, 99999}, {126, 99999}, {130, 99999}},
		"cordon": {{3000, 99999}, {2900, 99999}, {3100, 99999}},
	}
	// Memory comes from the traced runs' sums, never from wait4's peak.
	totals := map[string][]usage{
		"bare":   {{1, 1024}, {1, 1024}, {1, 2048}},
		"bwrap":  {{1, 4096}, {1, 5120}},
		"cordon": {{1, 20480}},
	}
	var w bytes.Buffer
	table(&w, "/bin/true", tools, res, used, totals)
	out := w.String()
	for _, line := range []string{
		"| tool | median ms | IQR ms | vs bare | vs bwrap | minor faults | memory touched MiB |",
		"| bare | 2.0 | 2.0-3.0 | 1.00x | 0.25x | 50 | 1.0 |",
		"| bwrap | 8.0 | 8.0-8.0 | 4.00x | 1.00x | 126 | 5.0 |",
		"| cordon | 31.0 | 31.0-32.0 | 15.50x | 3.88x | 3000 | 20.0 |",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "firejail") {
		t.Errorf("a tool without runs is listed:\n%s", out)
	}
	// Without traced runs (the review's table), the memory is a dash.
	w.Reset()
	table(&w, "/bin/true", tools, res, used, nil)
	if !strings.Contains(w.String(), "| cordon | 31.0 | 31.0-32.0 | 15.50x | 3.88x | 3000 | - |\n") {
		t.Errorf("without traced runs:\n%s", w.String())
	}
}

func TestProcTableCollapsesMany(t *testing.T) {
	rows := []procRow{{"python3", 2, usage{2800, 13 * 1024}}}
	for i := 0; i < manyRows; i++ {
		rows = append(rows, procRow{"bash", 2, usage{100, 2048}}, procRow{"readlink", 1, usage{50, 1024}})
	}
	var w bytes.Buffer
	procTable(&w, "python3 -c pass", []string{"bare"}, map[string][]procRow{"bare": rows}, 2)
	out := w.String()
	for _, line := range []string{
		"| bare | python3 | 2800 | 13.0 |",
		"| bare | bash (8 of them) | 800 | 16.0 |",
		"| bare | readlink (8 of them) (in 1 of 2 runs) | 400 | 8.0 |",
		"| bare | all 17 | 4000 | 37.0 |",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
}

func TestTraceRunEndsWithOrphansLeft(t *testing.T) {
	canTrace(t)
	defer func(d time.Duration) { orphanWait = d }(orphanWait)
	orphanWait = 100 * time.Millisecond
	// The shell leaves a process that would outlive the test: the traced
	// run still ends, the orphan killed once the wait is over.
	procs, err := traceRun([]string{"sh", "-c", "sleep 100000 & exit 0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) == 0 || procs[0].name != "sh" || procs[0].minflt <= 0 {
		t.Errorf("processes %+v, want the shell first, with its faults", procs)
	}
}
