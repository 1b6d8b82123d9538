package compat_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// column is one way of running the workloads: a column of the table.
type column struct {
	name string
	// user runs the sandbox (setpriv) when the test is root; -1 for the
	// test's own.
	user int
	// bwrap: under bubblewrap, else under cordon.
	bwrap bool
	// flags are cordon's flags of this column.
	flags []string
	// absent says why the column cannot run here; "" when it can.
	absent string
}

// result is how one workload did in one column.
type result struct {
	status string // pass, fail, known (a known failure of cordon's), skip
	wall   time.Duration
	note   string // why it failed or was skipped
	output string // the end of its output, on failure
}

// row is one workload's results, by column.
type row struct {
	w   workload
	res map[string]result
}

// judge names what fails the test in a workload's results: every failure
// under cordon, saying whether it is cordon's own (bubblewrap runs the
// workload) or also bubblewrap's (the workload's problem or the host's), and
// a known failure that passes; and what is only worth a note.
func judge(w workload, cols []column, res map[string]result) (errs, notes []string) {
	var bw result
	for _, c := range cols {
		if c.bwrap {
			bw = res[c.name]
		}
	}
	for _, c := range cols {
		got := res[c.name]
		if c.bwrap {
			if got.status == "fail" {
				notes = append(notes, fmt.Sprintf("%s fails under bubblewrap (%s): the comparison is lost for it\n%s", w.name, got.note, got.output))
			}
			continue
		}
		switch got.status {
		case "known":
			notes = append(notes, fmt.Sprintf("%s under %s: a known failure of cordon's: %s", w.name, c.name, got.note))
		case "pass":
			if k, ok := known[w.name]; ok {
				errs = append(errs, fmt.Sprintf("%s passes under %s, but is listed as a known failure (%s): remove it from known", w.name, c.name, k.cause))
			}
		case "fail":
			var whose string
			switch bw.status {
			case "pass":
				whose = "cordon's own failure: it passes under bubblewrap"
			case "fail", "known":
				whose = "it fails under bubblewrap too: the workload's problem or the host's"
			default:
				whose = "no bubblewrap to compare with (" + bw.note + ")"
			}
			errs = append(errs, fmt.Sprintf("%s fails under %s (%s); %s\n%s", w.name, c.name, got.note, whose, got.output))
		}
	}
	return errs, notes
}

// report is the side-by-side table, in Markdown, with a line for each
// failure and skip under it.
func report(cols []column, rows []row) string {
	var b strings.Builder
	b.WriteString("| workload |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c.name)
	}
	b.WriteString("\n|---|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var notes []string
	for _, rw := range rows {
		fmt.Fprintf(&b, "| %s |", rw.w.name)
		// One note for the columns that say the same.
		var said []string
		where := map[string][]string{}
		for _, c := range cols {
			res := rw.res[c.name]
			cell := res.status
			switch res.status {
			case "pass":
				cell = fmt.Sprintf("pass, %.1f s", res.wall.Seconds())
			case "fail":
				cell = fmt.Sprintf("**FAIL**, %.1f s", res.wall.Seconds())
			case "known":
				cell = fmt.Sprintf("**FAIL** (known), %.1f s", res.wall.Seconds())
			}
			fmt.Fprintf(&b, " %s |", cell)
			if res.note != "" && res.status != "absent" {
				n := res.status + ": " + res.note
				if where[n] == nil {
					said = append(said, n)
				}
				where[n] = append(where[n], c.name)
			}
		}
		b.WriteString("\n")
		for _, n := range said {
			notes = append(notes, fmt.Sprintf("- %s, %s: %s", rw.w.name, strings.Join(where[n], ", "), n))
		}
	}
	for _, c := range cols {
		if c.absent != "" {
			notes = append(notes, fmt.Sprintf("- %s: not run (%s)", c.name, c.absent))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// TestJudge checks that a failure under cordon fails the suite, named as
// cordon's own or not by what bubblewrap did, and that a known failure that
// passes fails it too.
func TestJudge(t *testing.T) {
	cols := []column{{name: "cordon (root)"}, {name: "cordon (rootless)"}, {name: "bubblewrap", bwrap: true}}
	pass, fail := result{status: "pass"}, result{status: "fail", note: "exit status 1"}
	for _, tc := range []struct {
		name           string
		workload       string
		root, rootless result
		bwrap          result
		wantErrs       []string // a phrase of each error, in order
		wantNotes      int
	}{
		{name: "all pass", workload: "git", root: pass, rootless: pass, bwrap: pass},
		{name: "cordon's own", workload: "git", root: fail, rootless: pass, bwrap: pass,
			wantErrs: []string{"git fails under cordon (root) (exit status 1); cordon's own failure: it passes under bubblewrap"}},
		{name: "both fail", workload: "git", root: fail, rootless: fail, bwrap: fail,
			wantErrs: []string{"fails under bubblewrap too", "fails under bubblewrap too"}, wantNotes: 1},
		{name: "no bubblewrap", workload: "git", root: pass, rootless: fail, bwrap: result{status: "absent", note: "bubblewrap is not installed"},
			wantErrs: []string{"no bubblewrap to compare with (bubblewrap is not installed)"}},
		{name: "only bubblewrap fails", workload: "git", root: pass, rootless: pass, bwrap: fail, wantNotes: 1},
		{name: "known", workload: "go-module", root: result{status: "known"}, rootless: result{status: "known"}, bwrap: pass, wantNotes: 2},
		{name: "known passes", workload: "git-init", root: pass, rootless: result{status: "known"}, bwrap: pass,
			wantErrs: []string{"git-init passes under cordon (root), but is listed as a known failure"}, wantNotes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := map[string]result{"cordon (root)": tc.root, "cordon (rootless)": tc.rootless, "bubblewrap": tc.bwrap}
			errs, notes := judge(workload{name: tc.workload}, cols, res)
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors: %q, want %d", errs, len(tc.wantErrs))
			}
			for i, e := range errs {
				if !strings.Contains(e, tc.wantErrs[i]) {
					t.Errorf("error %d: %q does not say %q", i, e, tc.wantErrs[i])
				}
			}
			if len(notes) != tc.wantNotes {
				t.Errorf("notes: %q, want %d", notes, tc.wantNotes)
			}
		})
	}
}

// TestReport checks the table: a cell per column, and one note for the
// columns that fail the same way.
func TestReport(t *testing.T) {
	cols := []column{{name: "cordon (root)"}, {name: "cordon (rootless)"}, {name: "bubblewrap", bwrap: true, absent: "bubblewrap is not installed"}}
	known := result{status: "known", wall: 1500 * time.Millisecond, note: "the cause"}
	rows := []row{
		{w: workload{name: "git"}, res: map[string]result{"cordon (root)": {status: "pass", wall: 700 * time.Millisecond}, "cordon (rootless)": {status: "pass", wall: time.Second}, "bubblewrap": {status: "absent", note: "bubblewrap is not installed"}}},
		{w: workload{name: "go-module"}, res: map[string]result{"cordon (root)": known, "cordon (rootless)": known, "bubblewrap": {status: "absent", note: "bubblewrap is not installed"}}},
	}
	want := `| workload | cordon (root) | cordon (rootless) | bubblewrap |
|---|---|---|---|
| git | pass, 0.7 s | pass, 1.0 s | absent |
| go-module | **FAIL** (known), 1.5 s | **FAIL** (known), 1.5 s | absent |

- go-module, cordon (root), cordon (rootless): known: the cause
- bubblewrap: not run (bubblewrap is not installed)
`
	if got := report(cols, rows); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}
