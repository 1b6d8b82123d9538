package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// guardedHeading names the report's section on guarded workspaces, which
// -only guarded -docs replaces in docs/BENCHMARKS.md.
const guardedHeading = "### Guarded workspace against direct"

// guardedRounds is how many rounds -only guarded runs unless -n says.
const guardedRounds = 10

// A workload is real work run in a workspace of its own, once guarded and
// once direct each round.
type workload struct {
	name string // in the table
	// skip says why the workload cannot run here; the rest is unset then.
	skip string
	ws   string
	// script is the shell script the sandbox runs; flags go to cordon run
	// before it (both modes).
	script string
	flags  []string
	// reset brings the workspace back to where every round starts,
	// outside the timing.
	reset func() error
	// check says what the workspace holds after a run (the same for a
	// guarded run as for a direct one, or the guarded run lost something),
	// or why it does not hold the results.
	check func() (string, error)
}

// guardedRun is one timed run of a workload.
type guardedRun struct {
	total, command, after time.Duration
	landed                int
	waiting               int    // changes held in a set, from the outcome
	changes               string // cordon changes, when a set waits
}

// guardedResult is what the rounds of one workload measured.
type guardedResult struct {
	direct, guarded []guardedRun
	checked         string // what the workspace held, every round
	// held is what waited after the first guarded run a set waited after
	// (and why), heldRuns how many such runs there were, of guardedRuns
	// (the untimed first run included).
	held                  string
	heldRuns, guardedRuns int
	failed                []string
}

// guarded measures a guarded workspace (cordon run --guarded) against a
// direct one (cordon run) on real work: npm install of a dependency set
// from a warm cache, a build that writes 10,000 small files, and a loop of
// git commits in one sandboxed command. Each round runs both modes, in a
// new random order, from the same workspace; after every run the harness
// checks that the workspace holds the results and, for a guarded run, that
// no change set waits. The state directory, where a guarded run's layer
// is kept, is on the same file system as the workspaces.
func guarded(w *bytes.Buffer, cordon string, n int, short bool) {
	base, err := os.MkdirTemp("/var/tmp", "cordon-bench-guarded-")
	if err != nil {
		base, err = os.MkdirTemp("", "cordon-bench-guarded-")
	}
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(base)
	state := filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		fatal(err)
	}
	defer os.Setenv("CORDON_STATE_DIR", os.Getenv("CORDON_STATE_DIR"))
	os.Setenv("CORDON_STATE_DIR", state)

	loads := []*workload{npmWorkload(base, short), buildWorkload(base, short), gitWorkload(base, cordon, short, false), gitWorkload(base, cordon, short, true)}
	fmt.Fprintf(w, "%s\n\nMeasured %s on %s.\n\n", guardedHeading, time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	fmt.Fprintf(w, "cordon on the embedded default profile, `cordon run --guarded` against `cordon run` (direct), on real work: %d interleaved rounds of each workload, both modes in each round, in a new random order. Every run starts from the same workspace: outside the timing, what the last run made is moved out of it (and deleted only at the end: on a file system that checks each inode it would reuse for a recent deletion, as ext4 without a journal does, thousands of files deleted just before a run slow its own file creation several times), at least 100 ms before the next run (a guarded run takes what the host changed from 20 ms before its start as a conflict, and holds it). The state directory, where a guarded run keeps its layer, and the workspaces are on one file system (in %s, %s). A run is timed whole, from starting `cordon run` until it exits, and in parts by the timestamps its script writes as the command starts and ends: the command, and what follows it (for a guarded run: capturing the layer, landing its changes in the workspace, removing the layer). Medians; the ratio is of the medians.\n\n", n, filepath.Dir(base), fsName(base))
	fmt.Fprintf(w, "| workload | direct ms | guarded ms | guarded/direct | IQR ms, direct / guarded | command ms, direct / guarded | after the command ms, direct / guarded | landed per guarded run |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var notes []string
	for _, l := range loads {
		if l.skip != "" {
			notes = append(notes, fmt.Sprintf("- %s: skipped (%s).", l.name, l.skip))
			continue
		}
		r := l.measure(cordon, base, n)
		for _, f := range r.failed {
			notes = append(notes, fmt.Sprintf("- %s: %s", l.name, f))
		}
		if len(r.direct) == 0 || len(r.guarded) == 0 {
			continue
		}
		d, g := durations(r.direct, total), durations(r.guarded, total)
		landed := make([]int, len(r.guarded))
		for i, x := range r.guarded {
			landed[i] = x.landed
		}
		slices.Sort(landed)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s-%s / %s-%s | %s / %s | %s / %s | %d |\n", l.name,
			ms(median(d)), ms(median(g)), ratio(median(g), median(d)),
			ms(quantile(d, 0.25)), ms(quantile(d, 0.75)), ms(quantile(g, 0.25)), ms(quantile(g, 0.75)),
			ms(median(durations(r.direct, command))), ms(median(durations(r.guarded, command))),
			ms(median(durations(r.direct, after))), ms(median(durations(r.guarded, after))),
			landed[len(landed)/2])
		if r.heldRuns == 0 {
			notes = append(notes, fmt.Sprintf("- %s: after every run, direct or guarded, the workspace held %s; after every guarded run, `cordon changes` showed no set waiting.", l.name, r.checked))
		} else {
			notes = append(notes, fmt.Sprintf("- %s: the workspace held %s; after %d of %d guarded runs (the untimed first included) a change set waited, the first:", l.name, r.checked, r.heldRuns, r.guardedRuns),
				"  ```\n"+indent(r.held, "  ")+"\n  ```")
		}
	}
	fmt.Fprintf(w, "\n%s\n\n", strings.Join(notes, "\n"))
}

func total(r guardedRun) time.Duration   { return r.total }
func command(r guardedRun) time.Duration { return r.command }
func after(r guardedRun) time.Duration   { return r.after }

func durations(runs []guardedRun, f func(guardedRun) time.Duration) []time.Duration {
	out := make([]time.Duration, len(runs))
	for i, r := range runs {
		out[i] = f(r)
	}
	return out
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by)
}

// measure runs the workload once in each mode untimed (a run that fails
// there ends the workload, with the reason), then n timed rounds.
func (l *workload) measure(cordon, base string, n int) guardedResult {
	var r guardedResult
	modes := []bool{false, true}
	for _, g := range modes {
		run, checked, err := l.once(cordon, base, g)
		if err != nil {
			r.failed = append(r.failed, fmt.Sprintf("the first %s run failed, so the workload was not measured: %v", modeName(g), err))
			return r
		}
		switch {
		case !g:
			r.checked = checked
		case checked != r.checked:
			r.failed = append(r.failed, fmt.Sprintf("after the first guarded run the workspace held %s, after a direct one %s", checked, r.checked))
		}
		r.count(g, run)
	}
	for round := 0; round < n; round++ {
		rand.Shuffle(len(modes), func(i, j int) { modes[i], modes[j] = modes[j], modes[i] })
		for _, g := range modes {
			run, checked, err := l.once(cordon, base, g)
			switch {
			case err != nil:
				r.failed = append(r.failed, fmt.Sprintf("a %s run failed: %v", modeName(g), err))
				continue
			case checked != r.checked:
				r.failed = append(r.failed, fmt.Sprintf("after a %s run the workspace held %s, not %s", modeName(g), checked, r.checked))
			}
			r.count(g, run)
			if g {
				r.guarded = append(r.guarded, run)
			} else {
				r.direct = append(r.direct, run)
			}
		}
	}
	return r
}

// count notes what waited after a guarded run.
func (r *guardedResult) count(guarded bool, run guardedRun) {
	if !guarded {
		return
	}
	r.guardedRuns++
	if run.changes != "" {
		r.heldRuns++
		if r.held == "" {
			r.held = run.changes
		}
	}
}

func modeName(guarded bool) string {
	if guarded {
		return "guarded"
	}
	return "direct"
}

// resetGap is the time between a workspace's reset and the next run: more
// than the 20 ms (cordon's startSlack, internal/cli/run.go) before its
// start from which a guarded run takes the host's changes as made during
// it.
const resetGap = 100 * time.Millisecond

// Markers the sandboxed script writes on stderr as the command starts and
// ends, with the time in nanoseconds.
const (
	startMark = "cordon-bench-start "
	endMark   = "cordon-bench-end "
)

// once resets the workspace, runs the workload in it, guarded or direct,
// and checks what the workspace then holds; for a guarded run it also
// lists the change sets that wait (and discards them, so that the next
// round starts as this one did).
func (l *workload) once(cordon, base string, guarded bool) (guardedRun, string, error) {
	var run guardedRun
	if err := l.reset(); err != nil {
		return run, "", fmt.Errorf("reset: %w", err)
	}
	// A guarded run takes what the host changed from startSlack before
	// it started as changed during the run (a conflict, which waits):
	// the reset must be older.
	time.Sleep(resetGap)
	outcomeFile := filepath.Join(base, "outcome.json")
	os.Remove(outcomeFile)
	args := []string{"run", "--workspace", l.ws, "--outcome", outcomeFile}
	if guarded {
		args = append(args, "--guarded")
	}
	args = append(args, l.flags...)
	script := fmt.Sprintf("date '+%s%%s%%N' >&2\n%s\ns=$?\ndate '+%s%%s%%N' >&2\nexit $s", startMark, l.script, endMark)
	args = append(args, "--", "sh", "-c", script)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cordon, args...)
	cmd.Dir = l.ws
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	ended := time.Now()
	if err != nil {
		return run, "", fmt.Errorf("%v: %s", err, tail(stderr.String()+stdout.String(), 800))
	}
	run.total = ended.Sub(began)
	start, end, ok := marks(stderr.String())
	if !ok {
		return run, "", fmt.Errorf("the script's timestamps are missing from its output: %s", tail(stderr.String(), 400))
	}
	run.command, run.after = end.Sub(start), ended.Sub(end)
	var out struct {
		Changes *struct {
			Entries int `json:"entries"`
			Landed  int `json:"landed"`
		} `json:"changes"`
	}
	if b, err := os.ReadFile(outcomeFile); err == nil && json.Unmarshal(b, &out) == nil && out.Changes != nil {
		run.landed, run.waiting = out.Changes.Landed, out.Changes.Entries
	}
	if guarded {
		if out.Changes == nil {
			return run, "", fmt.Errorf("the guarded run's outcome says nothing of its changes")
		}
		held, err := waiting(cordon, stderr.String())
		if err != nil {
			return run, "", err
		}
		if held == "" && run.waiting > 0 {
			return run, "", fmt.Errorf("the outcome says %d changes wait, cordon changes lists no set", run.waiting)
		}
		run.changes = held
	}
	checked, err := l.check()
	if err != nil {
		if run.changes != "" {
			err = fmt.Errorf("%w; what waited:\n%s", err, run.changes)
		}
		return run, "", err
	}
	return run, checked, nil
}

// marks reads the script's timestamps from its stderr.
func marks(stderr string) (start, end time.Time, ok bool) {
	var got int
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		for _, m := range []struct {
			prefix string
			t      *time.Time
		}{{startMark, &start}, {endMark, &end}} {
			if rest, found := strings.CutPrefix(sc.Text(), m.prefix); found {
				if ns, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
					*m.t = time.Unix(0, ns)
					got++
				}
			}
		}
	}
	return start, end, got == 2
}

// waiting lists the change sets that wait after a guarded run, what cordon
// run said of them and each set's changes, and discards them; "" when none
// waits.
func waiting(cordon, runStderr string) (string, error) {
	list, err := exec.Command(cordon, "changes").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cordon changes: %v: %s", err, list)
	}
	js, err := exec.Command(cordon, "changes", "--json").Output()
	if err != nil {
		return "", fmt.Errorf("cordon changes --json: %v", err)
	}
	var sets []struct {
		Run string `json:"run"`
	}
	if err := json.Unmarshal(js, &sets); err != nil {
		return "", fmt.Errorf("cordon changes --json: %v", err)
	}
	if len(sets) == 0 {
		return "", nil
	}
	var rep strings.Builder
	for _, line := range strings.Split(runStderr, "\n") {
		if strings.HasPrefix(line, "cordon:") {
			fmt.Fprintf(&rep, "%s\n", line)
		}
	}
	fmt.Fprintf(&rep, "$ cordon changes\n%s", list)
	for _, s := range sets {
		one, _ := exec.Command(cordon, "changes", s.Run).CombinedOutput()
		fmt.Fprintf(&rep, "$ cordon changes %s\n%s", s.Run, one)
		if out, err := exec.Command(cordon, "discard", s.Run).CombinedOutput(); err != nil {
			return "", fmt.Errorf("cordon discard %s: %v: %s", s.Run, err, out)
		}
	}
	return rep.String(), nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// fsName says which file system holds dir: its type and mount point.
func fsName(dir string) string {
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil {
		return "unknown"
	}
	mp := dir
	for d := dir; ; d = filepath.Dir(d) {
		var s syscall.Stat_t
		if syscall.Stat(d, &s) != nil || s.Dev != st.Dev {
			break
		}
		mp = d
		if d == "/" {
			break
		}
	}
	kind := "a file system"
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[1] == mp {
				kind = f[2] // the last mount there is the one in force
			}
		}
	}
	return kind + " mounted at " + mp
}

// npmDeps are the dependencies of the npm workload: a web service's, a
// few thousand files; short, a few of them.
var (
	npmDeps = map[string]string{
		"axios": "^1.7.2", "body-parser": "^1.20.2", "chalk": "^4.1.2", "commander": "^12.1.0",
		"cors": "^2.8.5", "dayjs": "^1.11.11", "dotenv": "^16.4.5", "express": "^4.19.2",
		"jsonwebtoken": "^9.0.2", "lodash": "^4.17.21", "moment": "^2.30.1", "mongoose": "^8.4.1",
		"rxjs": "^7.8.1", "uuid": "^9.0.1", "ws": "^8.17.1", "yargs": "^17.7.2",
	}
	npmDepsShort = map[string]string{"express": "^4.19.2", "lodash": "^4.17.21"}
)

// npmWorkload is npm install of npmDeps, offline, from a cache that npm
// filled on the host (with the network) before the rounds, which the
// sandbox reads and writes where it is (--rw). The lockfile that install
// wrote names every tarball, so that the sandbox needs nothing but the
// cache. Each round starts without node_modules.
func npmWorkload(base string, short bool) *workload {
	deps := npmDeps
	if short {
		deps = npmDepsShort
	}
	l := &workload{name: fmt.Sprintf("`npm install`, %d dependencies", len(deps))}
	npm, err := exec.LookPath("npm")
	if err != nil {
		l.skip = "npm is not installed"
		return l
	}
	cache, prep := filepath.Join(base, "npm-cache"), filepath.Join(base, "npm-prep")
	l.ws = filepath.Join(base, "npm")
	for _, d := range []string{cache, prep, l.ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			fatal(err)
		}
	}
	pkg, _ := json.MarshalIndent(map[string]any{"name": "bench-app", "version": "1.0.0", "private": true, "dependencies": deps}, "", "  ")
	if err := os.WriteFile(filepath.Join(prep, "package.json"), pkg, 0o644); err != nil {
		fatal(err)
	}
	// The registry's own settings (~/.npmrc) apply; the lockfile must name
	// the tarballs whatever they say of that.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--cache", cache, "--no-audit", "--no-fund", "--omit-lockfile-registry-resolved=false",
		"--fetch-retries=1", "--fetch-retry-mintimeout=1000", "--fetch-retry-maxtimeout=3000")
	cmd.Dir = prep
	if out, err := cmd.CombinedOutput(); err != nil {
		l.skip = fmt.Sprintf("npm could not fill its cache from the registry on the host: %v: %s", err, tail(string(out), 300))
		return l
	}
	lock, err := os.ReadFile(filepath.Join(prep, "package-lock.json"))
	if err != nil {
		l.skip = fmt.Sprintf("npm wrote no lockfile: %v", err)
		return l
	}
	var lf struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	json.Unmarshal(lock, &lf)
	pkgs := 0
	for k := range lf.Packages {
		if k != "" {
			pkgs++
		}
	}
	files, _ := countTree(filepath.Join(prep, "node_modules"))
	os.RemoveAll(prep)
	l.name = fmt.Sprintf("`npm install`, %d dependencies (%d packages, %s files and directories)", len(deps), pkgs, thousands(files))
	l.flags = []string{"--toolchain", "node", "--rw", cache}
	l.script = fmt.Sprintf("npm install --offline --cache '%s' --no-audit --no-fund --omit-lockfile-registry-resolved=false", cache)
	l.reset = func() error {
		if err := moveAside(base, filepath.Join(l.ws, "node_modules")); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(l.ws, "package.json"), pkg, 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(l.ws, "package-lock.json"), lock, 0o644)
	}
	l.check = func() (string, error) {
		n, err := countTree(filepath.Join(l.ws, "node_modules"))
		if err != nil {
			return "", err
		}
		// Every dependency loads, as the project would load it.
		load := exec.Command("node", "-e", `for (const d of Object.keys(require("./package.json").dependencies)) require(d)`)
		load.Dir = l.ws
		if out, err := load.CombinedOutput(); err != nil {
			return "", fmt.Errorf("a dependency does not load from node_modules: %v: %s", err, tail(string(out), 400))
		}
		return fmt.Sprintf("node_modules with %s files and directories, every dependency loading", thousands(n)), nil
	}
	return l
}

// moveAside takes p out of its workspace, into base/trash, which goes
// when the measurements end: deleted there, thousands of files would slow
// the creation of the next run's on a file system that, as ext4 without a
// journal does, checks each inode it would reuse for a deletion in the
// last 30 seconds.
func moveAside(base, p string) error {
	trash := filepath.Join(base, "trash")
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return err
	}
	d, err := os.MkdirTemp(trash, "")
	if err != nil {
		return err
	}
	if err := os.Rename(p, filepath.Join(d, filepath.Base(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// countTree counts what lies beneath dir.
func countTree(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			n++
		}
		return nil
	})
	return n, err
}

// buildMakefile builds each module src/M.src into a directory out/M: an
// object per line of the source, then an index of them. The shell's
// builtins write the objects; make starts a shell, mkdir and mv per module.
const buildMakefile = `SRCS := $(wildcard src/*.src)
all: $(patsubst src/%.src,out/%/index,$(SRCS))
out/%/index: src/%.src
	@mkdir -p out/$*
	@n=0; while IFS= read -r line; do n=$$((n+1)); printf '%s\n' "$$line" > out/$*/$$n.o; echo $$n.o; done < $< > $@.tmp && mv $@.tmp $@
`

// buildWorkload is make -j2 of 100 modules (10 short) that writes 10,000
// files (1,000) into out/, which each round starts without.
func buildWorkload(base string, short bool) *workload {
	modules := 100
	if short {
		modules = 10
	}
	const perModule = 100 // 99 objects and the index
	files := modules * perModule
	l := &workload{name: fmt.Sprintf("a build writing %s files (make -j2, %d modules)", thousands(files), modules)}
	if _, err := exec.LookPath("make"); err != nil {
		l.skip = "make is not installed"
		return l
	}
	l.ws = filepath.Join(base, "build")
	if err := os.MkdirAll(filepath.Join(l.ws, "src"), 0o755); err != nil {
		fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.ws, "Makefile"), []byte(buildMakefile), 0o644); err != nil {
		fatal(err)
	}
	for m := 0; m < modules; m++ {
		var src strings.Builder
		for i := 1; i < perModule; i++ {
			fmt.Fprintf(&src, "module m%03d symbol %d = %d\n", m, i, (m*7919+i*104729)%1000003)
		}
		if err := os.WriteFile(filepath.Join(l.ws, "src", fmt.Sprintf("m%03d.src", m)), []byte(src.String()), 0o644); err != nil {
			fatal(err)
		}
	}
	l.script = "make -s -j2"
	l.reset = func() error { return moveAside(base, filepath.Join(l.ws, "out")) }
	l.check = func() (string, error) {
		n, err := countTree(filepath.Join(l.ws, "out"))
		if err != nil {
			return "", err
		}
		if n != files+modules {
			return "", fmt.Errorf("out/ holds %d files and directories, not %d", n, files+modules)
		}
		idx, err := os.ReadFile(filepath.Join(l.ws, "out", "m000", "index"))
		if err != nil || strings.Count(string(idx), "\n") != perModule-1 {
			return "", fmt.Errorf("out/m000/index is not the module's index: %v", err)
		}
		return fmt.Sprintf("the %s files in out/", thousands(files)), nil
	}
	return l
}

// gitWorkload is a loop of commits, in one sandboxed command, in a
// repository of 1,000 files (200 short): each iteration edits a file, adds
// it and commits. Each round starts from the first commit, with what the
// last round committed pruned, the files older than the index. The index
// is refreshed as the sandbox sees the files (as the agent's last command
// would have left it) or, hostLast, as the host does (as git on the host
// leaves it): the owner a sandbox sees is not the host's, so that the
// first git add in the sandbox then hashes every file again, and freshens
// (utime) each object it finds, which in a guarded workspace copies it up.
func gitWorkload(base, cordon string, short, hostLast bool) *workload {
	iterations, files := 20, 1000
	if short {
		iterations, files = 5, 200
	}
	name, dir := fmt.Sprintf("`git commit` loop, %d commits (edit, add, commit) in a repository of %s files", iterations, thousands(files)), "git"
	if hostLast {
		name, dir = "the same, the index last refreshed by git on the host (the first `git add` hashes every file again)", "git-host"
	}
	l := &workload{name: name}
	if _, err := exec.LookPath("git"); err != nil {
		l.skip = "git is not installed"
		return l
	}
	l.ws = filepath.Join(base, dir)
	if err := os.MkdirAll(filepath.Join(l.ws, "src"), 0o755); err != nil {
		fatal(err)
	}
	for i := 0; i < files; i++ {
		body := strings.Repeat(fmt.Sprintf("line of file %d\n", i), 40)
		if err := os.WriteFile(filepath.Join(l.ws, "src", fmt.Sprintf("f%04d.txt", i)), []byte(body), 0o644); err != nil {
			fatal(err)
		}
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = l.ws
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, tail(string(out), 300))
		}
		return strings.TrimSpace(string(out)), nil
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"config", "user.name", "bench"}, {"config", "user.email", "bench@example.invalid"},
		{"add", "."}, {"commit", "-q", "-m", "base"}, {"tag", "base"},
	} {
		if _, err := git(args...); err != nil {
			l.skip = err.Error()
			return l
		}
	}
	round := 0
	l.script = fmt.Sprintf(`i=0
while [ $i -lt %d ]; do
  i=$((i+1))
  echo "round $ROUND edit $i" >> src/f$((i %% %d + 100)).txt
  git add src && git commit -q -m "edit $i" || exit 1
done`, iterations, files-100)
	tmpl := l.script
	past := time.Now().Add(-time.Hour)
	l.reset = func() error {
		for _, args := range [][]string{{"reset", "-q", "--hard", "base"}, {"reflog", "expire", "--expire=now", "--all"}, {"prune", "--expire=now"}} {
			if _, err := git(args...); err != nil {
				return err
			}
		}
		// The files as a checkout long done leaves them: older than the
		// index, which git then trusts (no file is racily clean, to be
		// hashed again by the next git add).
		ents, err := os.ReadDir(filepath.Join(l.ws, "src"))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := os.Chtimes(filepath.Join(l.ws, "src", e.Name()), past, past); err != nil {
				return err
			}
		}
		if hostLast {
			if _, err := git("update-index", "-q", "--refresh"); err != nil {
				return err
			}
		} else {
			refresh := exec.Command(cordon, "run", "--workspace", l.ws, "--", "git", "update-index", "-q", "--refresh")
			refresh.Dir = l.ws
			if out, err := refresh.CombinedOutput(); err != nil {
				return fmt.Errorf("git update-index in the sandbox: %v: %s", err, tail(string(out), 300))
			}
		}
		// Each round's edits are its own, as new content to git.
		round++
		l.script = "ROUND=" + strconv.Itoa(round) + "\n" + tmpl
		return nil
	}
	l.check = func() (string, error) {
		n, err := git("rev-list", "--count", "base..HEAD")
		if err != nil {
			return "", err
		}
		if n != strconv.Itoa(iterations) {
			return "", fmt.Errorf("%s commits since the first, not %d", n, iterations)
		}
		if st, err := git("status", "--porcelain"); err != nil || st != "" {
			return "", fmt.Errorf("the work tree is not clean after the commits: %v %s", err, st)
		}
		if _, err := git("fsck", "--no-progress", "--no-dangling"); err != nil {
			return "", err
		}
		return fmt.Sprintf("the %d commits in git log, a clean tree and a repository git fsck passes", iterations), nil
	}
	return l
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// spliceSection replaces, in the Markdown doc, the section that starts at
// heading (up to the next heading of its level or above) with section; a
// doc without it gets it before the heading before, or at its end.
func spliceSection(doc, heading, section, before string) string {
	section = strings.TrimRight(section, "\n") + "\n\n"
	if i := headingAt(doc, heading); i >= 0 {
		rest := doc[i+len(heading):]
		j := len(doc)
		for _, h := range []string{"\n### ", "\n## ", "\n# "} {
			if k := strings.Index(rest, h); k >= 0 && i+len(heading)+k+1 < j {
				j = i + len(heading) + k + 1
			}
		}
		return doc[:i] + section + doc[j:]
	}
	if i := headingAt(doc, before); i >= 0 {
		return doc[:i] + section + doc[i:]
	}
	return strings.TrimRight(doc, "\n") + "\n\n" + section
}

// headingAt is where the line heading starts in doc, or -1.
func headingAt(doc, heading string) int {
	for off := 0; ; {
		i := strings.Index(doc[off:], heading)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(heading)
		if (i == 0 || doc[i-1] == '\n') && (end == len(doc) || doc[end] == '\n') {
			return i
		}
		off = end
	}
}

// writeSectionDocs puts the section that starts with heading in
// docs/BENCHMARKS.md, in place of the one there (or before the goals).
func writeSectionDocs(repo, heading, section string) error {
	file := filepath.Join(repo, "docs", "BENCHMARKS.md")
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(section, heading) {
		return errors.New("the section does not start with its heading " + heading)
	}
	return os.WriteFile(file, []byte(spliceSection(string(b), heading, section, "### Goals")), 0o644)
}
