package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

// tracedRounds is how many traced runs of each tool give its per-process
// figures (fewer when the benchmark has fewer rounds).
const tracedRounds = 5

// medianUsage formats the medians of a tool's runs: minor faults and peak
// resident memory in MiB, or dashes when there are none.
func medianUsage(u []usage) (faults, rss string) {
	if len(u) == 0 {
		return "-", "-"
	}
	f := make([]int64, len(u))
	r := make([]int64, len(u))
	for i, x := range u {
		f[i], r[i] = x.minflt, x.rssKiB
	}
	return strconv.FormatInt(medianInt(f), 10), mib(medianInt(r))
}

func medianInt(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2] // as median: the upper middle when even
}

func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) }

// procRow is one process of a tool's traced runs, with its medians.
type procRow struct {
	name   string
	rounds int // how many of the runs started it
	usage
}

// perProcess matches the processes of several runs of one tool (the k-th
// process of a name in one run with the k-th of that name in another) and
// returns each with its medians, in the order they first started.
func perProcess(runs [][]proc) []procRow {
	type key struct {
		name string
		k    int
	}
	var order []key
	seen := map[key][]usage{}
	for _, run := range runs {
		count := map[string]int{}
		for _, p := range run {
			k := key{p.name, count[p.name]}
			count[p.name]++
			if _, ok := seen[k]; !ok {
				order = append(order, k)
			}
			seen[k] = append(seen[k], p.usage)
		}
	}
	rows := make([]procRow, 0, len(order))
	for _, k := range order {
		u := seen[k]
		f := make([]int64, len(u))
		r := make([]int64, len(u))
		for i, x := range u {
			f[i], r[i] = x.minflt, x.rssKiB
		}
		rows = append(rows, procRow{name: k.name, rounds: len(u), usage: usage{medianInt(f), medianInt(r)}})
	}
	return rows
}

// traced is what the traced runs of the tools found: each tool's processes
// with their medians, and each run's sum over its processes.
type traced struct {
	tools  []string
	rows   map[string][]procRow
	totals map[string][]usage // per run: faults and peak memory, summed over its processes
}

// traceTools traces rounds runs of payload under each tool that ran (has
// times in res).
func traceTools(payload []string, tools []tool, res map[string][]time.Duration, rounds int) traced {
	tr := traced{rows: map[string][]procRow{}, totals: map[string][]usage{}}
	for _, t := range tools {
		if t.wrap == nil || len(res[t.name]) == 0 {
			continue
		}
		var runs [][]proc
		for i := 0; i < rounds; i++ {
			ps, err := traceRun(t.wrap(payload))
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s, traced: %v\n", t.name, err)
				break
			}
			runs = append(runs, ps)
			var sum usage
			for _, p := range ps {
				sum.minflt += p.minflt
				sum.rssKiB += p.rssKiB
			}
			tr.totals[t.name] = append(tr.totals[t.name], sum)
		}
		if len(runs) > 0 {
			tr.rows[t.name] = perProcess(runs)
			tr.tools = append(tr.tools, t.name)
		}
	}
	return tr
}

// manyRows is how many processes a tool's run may list one by one; past
// it, processes of one name share a row.
const manyRows = 8

// collapse merges the rows of processes of one name into one, their
// figures summed, in the order the names first started.
func collapse(rows []procRow) []procRow {
	var out []procRow
	at := map[string]int{}
	count := map[string]int{}
	for _, r := range rows {
		count[r.name]++
		i, ok := at[r.name]
		if !ok {
			at[r.name] = len(out)
			out = append(out, r)
			continue
		}
		out[i].minflt += r.minflt
		out[i].rssKiB += r.rssKiB
		out[i].rounds = max(out[i].rounds, r.rounds)
	}
	for i := range out {
		if n := count[out[i].name]; n > 1 {
			out[i].name = fmt.Sprintf("%s (%d of them)", out[i].name, n)
		}
	}
	return out
}

// procTable writes each tool's processes, one row each (one row per name
// when there are many), and their sum.
func procTable(w *bytes.Buffer, payload string, tools []string, rows map[string][]procRow, rounds int) {
	if len(tools) == 0 {
		return
	}
	fmt.Fprintf(w, "### Processes of one run: `%s`\n\n", payload)
	fmt.Fprintf(w, "Each tool traced for %d runs (ptrace, stopping its processes only as they start a process or thread, exec and exit): the minor page faults and peak resident memory (VmHWM) of every process the run starts, the payload included, read as the process exits; medians. Tracing slows a run, not what it touches.\n\n", rounds)
	fmt.Fprintf(w, "| tool | process | minor faults | peak RSS MiB |\n|---|---|---:|---:|\n")
	for _, t := range tools {
		var sum usage
		list := rows[t]
		if len(list) > manyRows {
			list = collapse(list)
		}
		for _, r := range list {
			name := r.name
			if r.rounds < rounds {
				name += fmt.Sprintf(" (in %d of %d runs)", r.rounds, rounds)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s |\n", t, name, r.minflt, mib(r.rssKiB))
			sum.minflt += r.minflt
			sum.rssKiB += r.rssKiB
		}
		fmt.Fprintf(w, "| %s | all %d | %d | %s |\n", t, len(rows[t]), sum.minflt, mib(sum.rssKiB))
	}
	fmt.Fprintln(w)
}
