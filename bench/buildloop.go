package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// loopHeading names the report's section on the build loop, which -only
// loop -docs replaces in docs/BENCHMARKS.md.
const loopHeading = "### The edit-build-test loop"

// buildRounds is how many rounds the build loop runs unless -n says.
const buildRounds = 5

// loopRun is one way of running a build-loop workload: its command line,
// and the work done before it (outside the timing).
type loopRun struct {
	name string
	argv []string
	env  []string
}

// buildLoop measures the agent's edit-build-test loop on work a coding
// agent repeats dozens of times a task: go test of a one-file module, and
// npm ci of a real lock file with no registry reachable. Each runs on the
// host, in cordon on its default profile (the agent's caches warm from the
// runs before) and in bubblewrap with the same view, its home, and so the
// toolchains' caches, a tmpfs as peers leave it; after a warm-up run of
// each, n interleaved rounds in a new random order; medians, and ratios to
// the host's own.
func buildLoop(w *bytes.Buffer, cordon string, ws string, n int) {
	base, err := os.MkdirTemp("/var/tmp", "cordon-bench-loop-")
	if err != nil {
		base, err = os.MkdirTemp("", "cordon-bench-loop-")
	}
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(base)
	fmt.Fprintf(w, "%s\n\nMeasured %s on %s.\n\n", loopHeading, time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	fmt.Fprintf(w, "Work an agent repeats dozens of times a task, each run a new sandbox: `go test -count=1 ./...` of a one-file module, and `npm ci` of a lock file of 2 dependencies (express and lodash, about 70 packages) with no registry reachable from the sandbox. On the host, with its own caches; in cordon on the embedded default profile, whose caches are the agent's own and kept between its runs (`caches: auto`: the first run of each workload, untimed, fills them; npm's with the registry allowed); in bubblewrap with the view of the start-up tables, its home a tmpfs as peers leave it, so that every run starts with empty caches. One untimed warm-up run of each, then %d interleaved rounds in a new random order; medians, and the ratio to the host's.\n\n", n)
	fmt.Fprintf(w, "| workload | host ms | cordon ms | cordon/host | bwrap ms | bwrap/host |\n|---|---:|---:|---:|---:|---:|\n")
	var notes []string
	for _, l := range []func(string, string, string) (string, []loopRun, func(string) string, string){goTestLoop, npmCiLoop} {
		name, runs, check, skip := l(base, cordon, ws)
		if skip != "" {
			notes = append(notes, fmt.Sprintf("- %s: skipped (%s).", name, skip))
			continue
		}
		res, failed := loopMeasure(runs, check, n)
		for _, f := range failed {
			notes = append(notes, fmt.Sprintf("- %s: %s", name, f))
		}
		host := median(res["host"])
		cell := func(tool string) (string, string) {
			d := res[tool]
			if len(d) == 0 {
				return "fails", "-"
			}
			return ms(median(d)), ratio(median(d), host)
		}
		c, cr := cell("cordon")
		b, br := cell("bwrap")
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", name, ms(host), c, cr, b, br)
		switch {
		case strings.HasPrefix(name, "`go test") && len(res["cordon"]) > 0 && host > 0:
			record(goalGoTest, float64(median(res["cordon"]))/float64(host))
		case strings.HasPrefix(name, "`npm ci"):
			works := 0.0
			if len(res["cordon"]) == n {
				works = 1
			}
			record(goalNpmOffline, works)
		}
	}
	w.WriteString("\n")
	for _, s := range notes {
		fmt.Fprintln(w, s)
	}
	if len(notes) > 0 {
		w.WriteString("\n")
	}
}

// bwrapLoop is bubblewrap with the start-up tables' view, the workspace
// dir read-write and its working directory, HOME a tmpfs.
func bwrapLoop(dir string, cmd ...string) []string {
	args := []string{"bwrap", "--unshare-all", "--die-with-parent", "--new-session"}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives", "/etc/ld.so.cache", "/etc/ssl/certs"} {
		if _, err := os.Stat(d); err == nil {
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/home/agent", "--setenv", "HOME", "/home/agent",
		"--bind", dir, dir, "--chdir", dir, "--cap-drop", "ALL")
	return append(args, cmd...)
}

// goTestLoop is go test of a one-file module.
func goTestLoop(base, cordon, _ string) (string, []loopRun, func(string) string, string) {
	name := "`go test -count=1 ./...`, a one-file module"
	goBin, err := exec.LookPath("go")
	if err != nil {
		return name, nil, nil, "go is not installed"
	}
	dir := filepath.Join(base, "gomod")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "m_test.go"), []byte("package m\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif 2+2 != 4 {\n\t\tt.Fatal(\"sum\")\n\t}\n}\n"), 0o644)
	test := []string{goBin, "test", "-count=1", "./..."}
	runs := []loopRun{
		{name: "host", argv: append([]string{"sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dir}, test...)},
		{name: "cordon", argv: append([]string{"sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dir, cordon, "run", "--workspace", dir, "--"}, test...)},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		runs = append(runs, loopRun{name: "bwrap", argv: bwrapLoop(dir, append([]string{"/usr/bin/env", "PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin"}, test...)...)})
	}
	check := func(out string) string {
		if !strings.Contains(out, "ok  \texample.com/m") {
			return "no ok line: " + tail(out, 200)
		}
		return ""
	}
	return name, runs, check, ""
}

// npmCiLoop is npm ci of a lock file of two dependencies (about 70 packages),
// made on the host from the registry. cordon's first run reaches the
// registry (--allow), filling the agent's cache; the measured ones reach
// nothing.
func npmCiLoop(base, cordon, _ string) (string, []loopRun, func(string) string, string) {
	name := "`npm ci`, 2 dependencies (express and lodash), no registry reachable"
	npm, err := exec.LookPath("npm")
	if err != nil {
		return name, nil, nil, "npm is not installed"
	}
	dir, cache := filepath.Join(base, "npm"), filepath.Join(base, "npm-host-cache")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "loop", "version": "1.0.0", "dependencies": {"express": "4.21.2", "lodash": "4.17.21"}}`+"\n"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mk := exec.CommandContext(ctx, npm, "install", "--cache", cache, "--no-audit", "--no-fund")
	mk.Dir = dir
	if out, err := mk.CombinedOutput(); err != nil {
		return name, nil, nil, fmt.Sprintf("npm could not make the lock file from the registry on the host: %v: %s", err, tail(string(out), 300))
	}
	fill := exec.CommandContext(ctx, cordon, "run", "--workspace", dir, "--allow", "registry.npmjs.org:443", "--", npm, "ci", "--no-audit", "--no-fund")
	fill.Dir = dir
	if out, err := fill.CombinedOutput(); err != nil {
		return name, nil, nil, fmt.Sprintf("cordon's first run, with the registry allowed, failed: %v: %s", err, tail(string(out), 300))
	}
	ci := []string{npm, "ci", "--no-audit", "--no-fund"}
	runs := []loopRun{
		{name: "host", argv: append(append([]string{"sh", "-c", `cd "$1" && rm -rf node_modules && shift && exec "$@"`, "sh", dir}, ci...), "--prefer-offline", "--cache", cache)},
		{name: "cordon", argv: append([]string{"sh", "-c", `cd "$1" && rm -rf node_modules && shift && exec "$@"`, "sh", dir, cordon, "run", "--workspace", dir, "--"}, ci...)},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		// --offline: without a cache, plain npm ci retries the registry
		// for minutes before it fails.
		runs = append(runs, loopRun{name: "bwrap", argv: append([]string{"sh", "-c", `cd "$1" && rm -rf node_modules && shift && exec "$@"`, "sh", dir}, bwrapLoop(dir, append(ci, "--offline")...)...)})
	}
	check := func(out string) string {
		if !strings.Contains(out, "added ") || !strings.Contains(out, " packages") {
			return "npm added no packages: " + tail(out, 200)
		}
		return ""
	}
	return name, runs, check, ""
}

// loopMeasure runs each way once untimed, then n interleaved rounds; a
// run whose output fails check counts as failed, with why (once per way).
func loopMeasure(runs []loopRun, check func(string) string, n int) (map[string][]time.Duration, []string) {
	res := map[string][]time.Duration{}
	var failed []string
	seen := map[string]bool{}
	one := func(r loopRun) (time.Duration, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, r.argv[0], r.argv[1:]...)
		cmd.Env = append(os.Environ(), r.env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		why := check(string(out))
		if err != nil && why == "" {
			why = fmt.Sprintf("%v: %s", err, tail(string(out), 200))
		}
		if why != "" {
			why = strings.Join(strings.Fields(why), " ") // one line of the report
			if !seen[r.name] {
				failed = append(failed, fmt.Sprintf("%s failed: %s", r.name, why))
				seen[r.name] = true
			}
			return d, false
		}
		return d, true
	}
	for _, r := range runs {
		one(r)
	}
	order := append([]loopRun(nil), runs...)
	for round := 0; round < n; round++ {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, r := range order {
			if d, ok := one(r); ok {
				res[r.name] = append(res[r.name], d)
			}
		}
	}
	return res, failed
}
