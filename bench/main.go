// Command bench measures cordon against the sandboxes people would use
// instead, on this machine, in one run: every tool is started in turn, round
// after round (interleaved), so that a noisy host slows them all alike. It
// prints a Markdown report: medians, the spread between the first and third
// quartiles, and each figure's ratio to bare exec and to bubblewrap; with
// -docs it also rewrites docs/BENCHMARKS.md and its start-up plot.
//
//	go run ./bench [-n 30] [-short] [-cordon ./cordon] [-docs] [-only startup|serve|idle|many|review|large|guarded|loop|compat]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tool is one way of running a command.
type tool struct {
	name string
	// wrap turns a command into the tool's command line; nil when absent.
	wrap func(cmd []string) []string
	why  string // why it is absent
}

func main() {
	n := flag.Int("n", 30, "rounds of each start-up measurement")
	short := flag.Bool("short", false, "a quick pass that proves the harness works: 3 rounds, 1 and 8 at once, no throughput runs, smaller guarded workloads")
	cordon := flag.String("cordon", "./cordon", "the cordon binary to measure")
	docs := flag.Bool("docs", false, "rewrite docs/BENCHMARKS.md and docs/benchmarks-startup.svg with the results")
	only := flag.String("only", "", "measure only `PART`: startup (the start-up tables), serve, review (a reviewed workspace against a direct one), large (a workspace of 50,000 files), guarded (a guarded workspace against a direct one on npm install, a build and git commits; -docs rewrites its section of docs/BENCHMARKS.md), loop (the edit-build-test loop: go test and npm ci on the host, in cordon with its caches and in bwrap; -docs rewrites its section), idle (memory per idle sandbox), many (sandboxes started together) or compat (the compatibility suite's table, docs/COMPATIBILITY.md)")
	flag.Parse()
	// The guarded workloads take seconds a run: fewer rounds, unless -n
	// says how many.
	guardedN, loopN := guardedRounds, buildRounds
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "n" {
			guardedN, loopN = *n, *n
		}
	})
	if *short {
		*n = 3
		guardedN, loopN = 3, 2
	}
	repo, _ := os.Getwd()
	if r := os.Getenv("CORDON_REPO"); r != "" {
		repo = r
	}
	abs, err := filepath.Abs(*cordon)
	if err != nil {
		fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		fatal(fmt.Errorf("%s: build cordon first (see README)", abs))
	}
	ws, err := os.MkdirTemp("", "cordon-bench-ws-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(ws)
	logDir, err := os.MkdirTemp("/var/tmp", "cordon-bench-audit-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(logDir)
	os.Setenv("CORDON_AUDIT_LOG", filepath.Join(logDir, "audit.jsonl"))
	// Change sets of the reviewed runs, outside the workspace.
	os.Setenv("CORDON_STATE_DIR", filepath.Join(logDir, "state"))
	os.Chdir(ws)

	if *only == "compat" {
		if err := compat(repo, *docs); err != nil {
			fatal(err)
		}
		return
	}
	if *only == "review" {
		var rep bytes.Buffer
		review(&rep, repo, abs, ws, *n)
		os.Stdout.Write(rep.Bytes())
		return
	}
	if *only == "large" {
		var rep bytes.Buffer
		large(&rep, abs, *n)
		os.Stdout.Write(rep.Bytes())
		return
	}
	if *only == "guarded" {
		var rep bytes.Buffer
		guarded(&rep, abs, guardedN, *short)
		os.Stdout.Write(rep.Bytes())
		if *docs {
			if err := writeSectionDocs(repo, guardedHeading, rep.String()); err != nil {
				fatal(err)
			}
		}
		return
	}
	if *only == "loop" {
		var rep bytes.Buffer
		buildLoop(&rep, abs, ws, loopN)
		os.Stdout.Write(rep.Bytes())
		if *docs {
			if err := writeSectionDocs(repo, loopHeading, rep.String()); err != nil {
				fatal(err)
			}
		}
		return
	}
	if *only == "startup" {
		var rep bytes.Buffer
		startup(&rep, peers(abs, ws), *n)
		os.Stdout.Write(rep.Bytes())
		return
	}
	if *only == "idle" || *only == "many" {
		var rep bytes.Buffer
		tools := peers(abs, ws)
		if *only == "idle" {
			idleMemory(&rep, abs, tools, *short)
			idleServedRow(&rep, abs)
		} else {
			concurrency(&rep, abs, tools, *short)
		}
		os.Stdout.Write(rep.Bytes())
		return
	}
	if *only == "serve" {
		var rep bytes.Buffer
		served(&rep, abs, *n)
		os.Stdout.Write(rep.Bytes())
		return
	}
	tools := peers(abs, ws)
	var rep bytes.Buffer
	plot := startup(&rep, tools, *n)
	served(&rep, abs, *n)
	concurrency(&rep, abs, tools, *short)
	idleMemory(&rep, abs, tools, *short)
	guarded(&rep, abs, guardedN, *short)
	buildLoop(&rep, abs, ws, loopN)
	if !*short {
		large(&rep, abs, *n)
		microBenches(&rep, repo)
	}
	writeGoals(&rep)
	for _, t := range tools {
		if t.wrap == nil {
			fmt.Fprintf(&rep, "- %s: not measured (%s)\n", t.name, t.why)
		}
	}
	os.Stdout.Write(rep.Bytes())
	if *docs {
		if err := writeDocs(repo, rep.String(), plot); err != nil {
			fatal(err)
		}
	}
}

// startup measures the start-up of each payload under every tool: times
// and what each run touched, then each process's share; it returns the
// medians for the plot.
func startup(w *bytes.Buffer, tools []tool, n int) []bar {
	fmt.Fprintf(w, "Measured %s on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	fmt.Fprintf(w, "Start-up: %d interleaved rounds; median wall time of one run, the interquartile range, and ratios to bare exec and to bubblewrap; then what the whole run touched: the minor page faults of the tool's process tree (from wait4's rusage of the tool's process and of every orphan it left) and the memory it touched (the peak resident memory of each of its processes, summed, from the traced runs below), medians. (wait4's peak resident memory is not used: it counts, for the process the harness starts, the harness's own memory from before the exec.) cordon runs the embedded default profile with every layer on (namespaces, pivot_root, no capabilities, no_new_privs, Landlock, seccomp, cgroup limits, the audit log, fsynced).\n\n", n)
	var plot []bar
	for _, payload := range [][]string{{"/bin/true"}, {"python3", "-c", "pass"}} {
		res, used := measure(tools, payload, n)
		tr := traceTools(payload, tools, res, min(n, tracedRounds))
		table(w, strings.Join(payload, " "), tools, res, used, tr.totals)
		if c := median(res["cordon"]); payload[0] == "/bin/true" && c > 0 {
			if b := median(res["bwrap"]); b > 0 {
				record(goalColdBwrap, float64(c)/float64(b))
			}
			if b := median(res["bwrap+cgroup"]); b > 0 {
				record(goalColdCgroup, float64(c)/float64(b))
			}
		}
		procTable(w, strings.Join(payload, " "), tr.tools, tr.rows, min(n, tracedRounds))
		for _, t := range tools {
			if d := res[t.name]; len(d) > 0 {
				plot = append(plot, bar{strings.Join(payload, " "), t.name, median(d)})
			}
		}
	}
	return plot
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// peers lists the tools, each with an equivalent view where it has one:
// system directories read-only, the workspace read-write, new /proc, /dev
// and /tmp, no network.
func peers(cordon, ws string) []tool {
	have := func(name string) (string, bool) {
		p, err := exec.LookPath(name)
		return p, err == nil
	}
	var out []tool
	out = append(out, tool{name: "bare", wrap: func(c []string) []string { return c }})
	if p, ok := have("unshare"); ok {
		out = append(out, tool{name: "unshare", wrap: func(c []string) []string {
			return append([]string{p, "-Upmnif", "--mount-proc"}, c...)
		}})
	}
	if p, ok := have("bwrap"); ok {
		bwrap := func(c []string) []string {
			args := []string{p, "--unshare-all", "--die-with-parent", "--new-session"}
			for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives", "/etc/ld.so.cache"} {
				if _, err := os.Stat(d); err == nil {
					args = append(args, "--ro-bind", d, d)
				}
			}
			args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", ws, ws, "--chdir", ws, "--cap-drop", "ALL")
			return append(args, c...)
		}
		out = append(out, tool{name: "bwrap", wrap: bwrap})
		if wrap, why := inCgroup(); why == "" {
			out = append(out, tool{name: "bwrap+cgroup", wrap: func(c []string) []string { return wrap(bwrap(c)) }})
		} else {
			out = append(out, tool{name: "bwrap+cgroup", why: why})
		}
	} else {
		out = append(out, tool{name: "bwrap", why: "bubblewrap is not installed"})
	}
	if p, ok := have("firejail"); ok {
		out = append(out, tool{name: "firejail", wrap: func(c []string) []string {
			return append([]string{p, "--quiet", "--noprofile", "--net=none", "--private-tmp", "--caps.drop=all", "--nonewprivs", "--seccomp"}, c...)
		}})
	} else {
		out = append(out, tool{name: "firejail", why: "firejail is not installed"})
	}
	if p, ok := have("srt"); ok {
		// srt reads options anywhere on its command line: give it the
		// command as one shell string.
		out = append(out, tool{name: "srt", wrap: func(c []string) []string {
			quoted := make([]string, len(c))
			for i, a := range c {
				quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
			}
			return []string{p, "-c", strings.Join(quoted, " ")}
		}})
	} else {
		out = append(out, tool{name: "srt", why: "sandbox-runtime (npm @anthropic-ai/sandbox-runtime) is not installed"})
	}
	out = append(out,
		tool{name: "cordon", wrap: func(c []string) []string { return append([]string{cordon, "run", "--"}, c...) }},
		tool{name: "cordon+proxy", wrap: func(c []string) []string {
			return append([]string{cordon, "run", "--allow", "127.0.0.1:9", "--"}, c...)
		}},
		// A reviewed workspace: the overlay and its capped layer, and the
		// (empty) change set kept at the end.
		tool{name: "cordon+review", wrap: func(c []string) []string {
			return append([]string{cordon, "run", "--review", "--"}, c...)
		}},
	)
	return out
}

// measure runs payload under every tool, n rounds, in a new random order
// each round, and returns the wall times by tool and what each run touched
// (its process tree's minor page faults and peak resident memory). A tool
// whose first run fails is dropped, with the reason.
func measure(tools []tool, payload []string, n int) (map[string][]time.Duration, map[string][]usage) {
	res := map[string][]time.Duration{}
	used := map[string][]usage{}
	if undo, err := subreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v: the orphans of a run are not counted in its figures\n", err)
	} else {
		defer undo()
	}
	reap := func(u *usage) {
		if err := reapOrphans(u); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
	}
	live := map[string]bool{}
	for i := range tools {
		t := &tools[i]
		if t.wrap == nil {
			continue
		}
		out, err := exec.Command(t.wrap(payload)[0], t.wrap(payload)[1:]...).CombinedOutput()
		reap(&usage{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s cannot run %v here: %v: %s\n", t.name, payload, err, bytes.TrimSpace(out))
			continue
		}
		live[t.name] = true
	}
	order := make([]tool, 0, len(tools))
	for _, t := range tools {
		if live[t.name] {
			order = append(order, t)
		}
	}
	for round := 0; round < n; round++ {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, t := range order {
			argv := t.wrap(payload)
			start := time.Now()
			cmd := exec.Command(argv[0], argv[1:]...)
			err := cmd.Run()
			d := time.Since(start)
			if err != nil {
				reap(&usage{})
				continue
			}
			u := runUsage(cmd)
			reap(&u)
			res[t.name] = append(res[t.name], d)
			used[t.name] = append(used[t.name], u)
		}
	}
	return res, used
}

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

func quantile(d []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[int(q*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

func ratio(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64) + "x"
}

// table writes the start-up figures of one payload: per tool, the wall
// time and the minor faults of its runs (used), and the memory they touched
// (totals: the traced runs' peak resident memory summed over processes),
// medians.
func table(w *bytes.Buffer, payload string, tools []tool, res map[string][]time.Duration, used, totals map[string][]usage) {
	fmt.Fprintf(w, "### Start-up: `%s`\n\n| tool | median ms | IQR ms | vs bare | vs bwrap | minor faults | memory touched MiB |\n|---|---:|---:|---:|---:|---:|---:|\n", payload)
	bare, bwrap := median(res["bare"]), median(res["bwrap"])
	for _, t := range tools {
		d := res[t.name]
		if len(d) == 0 {
			continue
		}
		m := median(d)
		faults, _ := medianUsage(used[t.name])
		_, rss := medianUsage(totals[t.name])
		fmt.Fprintf(w, "| %s | %s | %s-%s | %s | %s | %s | %s |\n", t.name, ms(m), ms(quantile(d, 0.25)), ms(quantile(d, 0.75)), ratio(m, bare), ratio(m, bwrap), faults, rss)
	}
	fmt.Fprintln(w)
}

// concurrency starts k sandboxes at once and reports how long until all
// have run /bin/true, per tool that isolates (bwrap and cordon).
func concurrency(w *bytes.Buffer, cordon string, tools []tool, short bool) {
	ks := []int{1, 8, 32, 128}
	if short {
		ks = []int{1, 8}
	}
	fmt.Fprintf(w, "### Many at once: `/bin/true` in k sandboxes started together\n\nWall time until the last one ends, and per sandbox.\n\n| tool | k | total ms | per sandbox ms |\n|---|---:|---:|---:|\n")
	perSandbox := map[string]time.Duration{} // at the largest k
	for _, t := range tools {
		if t.wrap == nil || (t.name != "bwrap" && t.name != "cordon") {
			continue
		}
		for _, k := range ks {
			start := time.Now()
			var wg sync.WaitGroup
			failed := 0
			var mu sync.Mutex
			for i := 0; i < k; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					argv := t.wrap([]string{"/bin/true"})
					if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
						mu.Lock()
						failed++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			total := time.Since(start)
			note := ""
			if failed > 0 {
				note = fmt.Sprintf(" (%d failed)", failed)
			}
			fmt.Fprintf(w, "| %s | %d | %s%s | %s |\n", t.name, k, ms(total), note, ms(total/time.Duration(k)))
			if failed == 0 {
				perSandbox[t.name] = total / time.Duration(k)
			}
		}
	}
	fmt.Fprintln(w)
	if c, b := perSandbox["cordon"], perSandbox["bwrap"]; c > 0 && b > 0 {
		record(goalMany, float64(c)/float64(b))
	}
}

// idleMemory starts a few sandboxes running sleep and sums the resident
// memory of everything but the payload: for cordon, the supervisor and
// init. It looks twice: soon after the start, and once past the first of
// cordon's periodic checks (drift, every 10 s), which maps more of its
// program again. The anonymous part is what no other process shares: the
// rest is pages of the tools' programs, shared among the sandboxes. short
// looks once.
func idleMemory(w *bytes.Buffer, cordon string, tools []tool, short bool) {
	const k = 4
	looks := []time.Duration{1500 * time.Millisecond, 12 * time.Second}
	if short {
		looks = looks[:1]
	}
	fmt.Fprintf(w, "### Memory per idle sandbox\n\nResident memory (PSS) of the tool's own processes around `sleep`, averaged over %d sandboxes, at each time after they started; in brackets, the anonymous part (what is not the tools' own program files, shared among the sandboxes).\n\n| tool |", k)
	for _, at := range looks {
		fmt.Fprintf(w, " MiB per sandbox at %v |", at)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(looks)))
	for _, t := range tools {
		if t.wrap == nil || (t.name != "bwrap" && t.name != "cordon" && t.name != "firejail") {
			continue
		}
		var cmds []*exec.Cmd
		for i := 0; i < k; i++ {
			argv := t.wrap([]string{"sleep", "30"})
			c := exec.Command(argv[0], argv[1:]...)
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if c.Start() == nil {
				cmds = append(cmds, c)
			}
		}
		began := time.Now()
		cells := make([]string, len(looks))
		for i, at := range looks {
			time.Sleep(time.Until(began.Add(at)))
			var kib, anon int64
			for _, c := range cmds {
				for _, pid := range tree(c.Process.Pid) {
					if comm(pid) != "sleep" {
						p, a := pss(pid)
						kib, anon = kib+p, anon+a
					}
				}
			}
			if len(cmds) == 0 {
				continue
			}
			per := float64(kib) / 1024 / float64(len(cmds))
			cells[i] = fmt.Sprintf("%.1f (%.1f)", per, float64(anon)/1024/float64(len(cmds)))
			if t.name == "cordon" && i == 0 {
				record(goalIdleRun, per)
			}
		}
		for _, c := range cmds {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			c.Wait()
		}
		if len(cmds) > 0 {
			fmt.Fprintf(w, "| %s | %s |\n", t.name, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(w)
}

// tree lists pid and its descendants.
func tree(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// pss reads a process's proportional set size, and its anonymous part,
// in KiB.
func pss(pid int) (total, anon int64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	field := func(name string) int64 {
		m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+) kB`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n
	}
	return field("Pss"), field("Pss_Anon")
}

// goBench runs a Go benchmark of the repository, copies its figures and
// returns go test's output.
func goBench(w *bytes.Buffer, root, title, pkg, name, times string) string {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", name, "-benchtime", times, pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(w, "### %s\n\n```\n", title)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Benchmark") {
			fmt.Fprintln(w, line)
		}
	}
	if err != nil {
		fmt.Fprintf(w, "(failed: %v)\n", err)
	}
	fmt.Fprintf(w, "```\n\n")
	return string(out)
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
			cpu = string(m[1])
		}
	}
	var uts syscall.Utsname
	syscall.Uname(&uts)
	rel := make([]byte, 0, 65)
	for _, c := range uts.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var si syscall.Sysinfo_t
	syscall.Sysinfo(&si)
	who := "as root"
	if os.Geteuid() != 0 {
		who = "rootless"
	}
	return fmt.Sprintf("Linux %s, %s, %d cores, %.0f GiB, %s", rel, cpu, runtime.NumCPU(), float64(si.Totalram)*float64(si.Unit)/(1<<30), who)
}

// review measures what a reviewed workspace adds to a run (the overlay, its
// layer and the change set kept at the end), against the same run on a
// direct workspace, and what applying 10,000 files costs.
func review(w *bytes.Buffer, repo, cordon, ws string, n int) {
	var tools []tool
	for _, t := range peers(cordon, ws) {
		if t.name == "bare" || t.name == "bwrap" || t.name == "cordon" || t.name == "cordon+review" {
			tools = append(tools, t)
		}
	}
	res, used := measure(tools, []string{"/bin/true"}, n)
	table(w, "/bin/true", tools, res, used, nil)
	if d, r := res["cordon"], res["cordon+review"]; len(d) > 0 && len(r) > 0 {
		fmt.Fprintf(w, "A reviewed workspace adds %s ms to the median run (%s).\n\n", ms(median(r)-median(d)), ratio(median(r), median(d)))
	}
	goBench(w, repo, "Reviewed workspace: cordon apply of 10,000 small files (in 100 directories)", "./internal/changes", "Apply10k", "3x")
}

// microBenches runs the Go benchmarks of the hot paths and records their
// goals.
func microBenches(w *bytes.Buffer, repo string) {
	metric := func(out, name, unit, goal string, scale float64) {
		if v, ok := benchMetric(out, name, unit); ok {
			record(goal, v*scale)
		}
	}
	out := goBench(w, repo, "Egress proxy throughput (CONNECT through cordon's proxy vs a direct loopback connection, 64 MiB per transfer)", "./internal/egress", "Throughput", "10x")
	metric(out, "BenchmarkThroughput", "proxied/direct", goalProxyBytes, 1)
	out = goBench(w, repo, "Egress proxy connection setup (dial, and CONNECT through the proxy, then a one-byte round trip, vs the same directly)", "./internal/egress", "ConnectSetup", "300x")
	metric(out, "BenchmarkConnectSetup", "proxied/direct", goalProxySetup, 1)
	out = goBench(w, repo, "Audit log, events per second with every event durable before its append returns (1, 8 and 64 writers sharing syncs), beside what the disk allows: the median fdatasync latency of a one-line append measured in the same run, the sync-bound limit (writers ÷ latency) and the share of it reached", "./internal/audit", "Durable", "4000x")
	metric(out, "BenchmarkDurable/writers=8", "of-limit", goalAudit, 1)
	metric(out, "BenchmarkDurable/writers=64", "of-limit", goalAudit64, 1)
	out = goBench(w, repo, "Tool policy, one decision (a read that labels the session secret, then a refused fetch)", "./internal/toolpolicy", "Decide$", "100000x")
	metric(out, "BenchmarkDecide", "p99-µs/decision", goalPolicy, 1)
	out = goBench(w, repo, "Tool policy, one decision with CEL argument constraints (two constraints on a fetch's URL)", "./internal/toolpolicy", "DecideConstraints", "100000x")
	metric(out, "BenchmarkDecideConstraints", "p99-µs/decision", goalPolicy, 1)
	out = goBench(w, repo, "Tool policy, decisions on resolved files (a read of `.env.production` labelled by glob rules and recorded, then a write held to `notes/` by `args.path.within`; two decisions and two records per op)", "./internal/toolpolicy", "DecideFiles", "20000x")
	metric(out, "BenchmarkDecideFiles", "p99-µs/decision", goalPolicy, 1)
	goBench(w, repo, "Reviewed workspace: cordon apply of 10,000 small files (in 100 directories)", "./internal/changes", "Apply10k", "3x")
	out = goBench(w, repo, "A command in a pre-warmed sandbox through the Go API in the same process (sandbox.Box.Exec of /bin/true, what cordon serve does for a claimed sandbox without HTTP or the audit log), interleaved with a bare fork/exec, medians", "./internal/sandbox", "BoxExec", "300x")
	metric(out, "BenchmarkBoxExec", "box/bare", goalServeInProc, 1)
	out = goBench(w, repo, "MCP gateway, one tool call (an upstream tool called directly, through cordon's gateway, and through it with the durable audit log; in-memory transports, medians)", "./internal/gateway", "Call", "2000x")
	metric(out, "BenchmarkCall", "added-µs/call", goalGatewayCall, 1)
	goBench(w, repo, "MCP gateway, a tool server's call with a path, with and without the checks of what the server acted on (the path resolved again after the call and its directories compared; the resolver in the same process, interleaved, medians)", "./internal/gateway", "PathChecks", "2000x")
}

// large measures a run in a workspace of 50,000 files in 5,000 directories,
// as a repository with its dependencies is: before and after it, cordon
// searches the workspace (for credentials, and for what the host's tools
// obey that the run made), whole in a workspace it has not seen, and then
// only the directories whose change time moved, from the index it keeps.
func large(w *bytes.Buffer, cordon string, n int) {
	ws, err := os.MkdirTemp("", "cordon-bench-large-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(ws)
	for d := 0; d < 5000; d++ {
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", d/100), fmt.Sprintf("s%02d", d%100))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fatal(err)
		}
		for f := 0; f < 10; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.js", f)), []byte("x"), 0o644); err != nil {
				fatal(err)
			}
		}
	}
	var tools []tool
	for _, t := range peers(cordon, ws) {
		if t.name == "bare" || t.name == "bwrap" {
			tools = append(tools, t)
		}
	}
	tools = append(tools, tool{name: "cordon", wrap: func(c []string) []string {
		return append([]string{cordon, "run", "--workspace", ws, "--"}, c...)
	}})
	// The first run in the workspace, which searches it whole.
	os.RemoveAll(filepath.Join(os.Getenv("CORDON_STATE_DIR"), "walk"))
	start := time.Now()
	first := exec.Command(cordon, "run", "--workspace", ws, "--", "/bin/true")
	if out, err := first.CombinedOutput(); err != nil {
		fmt.Fprintf(w, "cordon in a large workspace failed: %v: %s\n\n", err, out)
		return
	}
	firstRun := time.Since(start)
	res, used := measure(tools, []string{"/bin/true"}, n)
	table(w, "/bin/true in a workspace of 50,000 files", tools, res, used, nil)
	if c, b := res["cordon"], res["bwrap"]; len(c) > 0 && len(b) > 0 {
		fmt.Fprintf(w, "The first run in the workspace, which searches it whole, took %s ms; later runs list only what changed (%s against bwrap).\n\n", ms(firstRun), ratio(median(c), median(b)))
	}
}
