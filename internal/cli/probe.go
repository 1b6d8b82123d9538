package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/hostfile"
	"github.com/cordon-sandbox/cordon/internal/journal"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/version"
)

// probeCmd implements `cordon probe [flags]`: the escape probes, run in
// sandboxes built from the profile exactly as `cordon run` builds them. Exit
// status 0 only when every probe is contained.
func probeCmd(e *env, args []string) int {
	fs := newFlags(e, "probe", "probe [flags]")
	var f probeFlags
	f.register(fs)
	pf, asJSON, compare, record, reports, auditLog, only, every, runs := &f.pf, &f.json, &f.compare, &f.record, &f.reports, &f.auditLog, &f.only, &f.every, &f.runs
	if err := parseFlags(fs, args); err != nil {
		return fail(e, err)
	}
	degraded := f.degraded
	if *every > 0 {
		file := pf.file
		if file != "" {
			file = pf.abs(e, file)
		}
		return probeEvery(e, args, file, *reports, *every, *runs)
	}
	if *only != "" && !slices.Contains(probe.AllCategories, *only) {
		return fail(e, fmt.Errorf("--only: unknown category %q", *only))
	}
	p, allow, al, err := pf.open(e, degraded, *auditLog)
	if err != nil {
		return fail(e, err)
	}
	sweepJournal(e, journalDirs(e, p)...)
	targets, cleanup, err := probe.Plant(outsideView(p, e.cwd))
	if err != nil {
		return fail(e, fmt.Errorf("planting the probes' targets: %w", err))
	}
	defer cleanup()
	if sandbox.Weakened("canary") { // test builds only: show the probe can fail
		if err := p.AddMount(filepath.Dir(targets.CanaryFile), false); err != nil {
			return fail(e, err)
		}
	}
	var old *probe.Report
	if *compare != "" {
		if old, err = probe.LoadReport(*compare); err != nil {
			return fail(e, fmt.Errorf("--compare: %w", err))
		}
	}

	r := &probeRunner{e: e, allow: allow, audit: al, guard: pf.guarded(e)}
	var rs []probe.Result
	clean := true
	// The probes inside the sandbox, on the profile as it is; then the
	// egress probes, on the profile with one destination allowed, so that
	// there is a proxy to attack; then the probes judged from outside.
	inside := []struct {
		battery []probe.Probe
		flag    string
		profile func() (*profile.Profile, error)
	}{
		{probe.Battery(), "", func() (*profile.Profile, error) { return p, nil }},
		{probe.EgressBattery(), "--egress", func() (*profile.Profile, error) {
			pe := p.Clone()
			return pe, pe.AddAllow(targets.AllowedAddr)
		}},
	}
	for _, in := range inside {
		if len(probe.Select(in.battery, *only)) == 0 {
			continue
		}
		ip, err := in.profile()
		if err != nil {
			return fail(e, err)
		}
		got, o, err := r.inside(ip, targets, in.flag, *only)
		if err != nil {
			return fail(e, err)
		}
		if !o.Clean() {
			clean = false
			fmt.Fprintf(e.stderr, "cordon: a probe run did not end cleanly: %s\n", o.Message)
		}
		rs = append(rs, got...)
	}
	rs = append(rs, probe.RunHost(probe.SelectHost(probe.HostBattery(), *only), r, p)...)
	if r.setupErr != nil {
		return fail(e, r.setupErr)
	}
	probe.Order(rs)

	if old != nil {
		probe.WriteChanges(e.stderr, probe.Compare(old.Results, rs))
	}
	report := probe.Report{
		Cordon:        version.String(),
		Time:          time.Now().UTC().Truncate(time.Second),
		Host:          probeHost(),
		ProfileSHA256: p.Hash(),
		Only:          *only,
		Results:       rs,
		Summary:       probe.Summarize(rs),
	}
	if *record {
		path, err := report.Save(*reports)
		if err != nil {
			return fail(e, fmt.Errorf("recording the report: %w", err))
		}
		fmt.Fprintf(e.stderr, "cordon: report recorded in %s\n", path)
	}
	if *asJSON {
		out, _ := json.MarshalIndent(report, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCATEGORY\tSTATUS\tEVIDENCE")
		for _, res := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.ID, res.Category, res.Status, res.Evidence)
		}
		tw.Flush()
		sum := probe.Summarize(rs)
		fmt.Fprintf(e.stdout, "%d probes: %d contained, %d escaped, %d error\n", sum.Total, sum.Contained, sum.Escaped, sum.Error)
	}
	if !probe.AllContained(rs) || !clean {
		return 1
	}
	return 0
}

// probeHost fingerprints this host for a report.
// probeFlags are cordon probe's flags.
type probeFlags struct {
	pf                               profileFlags
	json, record                     bool
	compare, reports, auditLog, only string
	degraded                         list
	every                            time.Duration
	runs                             int
}

func (f *probeFlags) register(fs *flag.FlagSet) {
	f.pf.register(fs)
	fs.BoolVar(&f.json, "json", false, "print the report as JSON (docs/probe.schema.json)")
	fs.StringVar(&f.compare, "compare", "", "report the probes whose status changed since the JSON report `OLD`")
	fs.BoolVar(&f.record, "record", false, "keep the JSON report on this host, where cordon lint looks for it (see --reports)")
	fs.StringVar(&f.reports, "reports", probe.ReportDir(), "the `DIR` of recorded reports")
	fs.StringVar(&f.auditLog, "audit-log", "", "record the probes' sandboxes in the audit log `FILE` (default: the configuration's)")
	fs.StringVar(&f.only, "only", "", "run only the probes of `CATEGORY` ("+strings.Join(probe.AllCategories, ", ")+")")
	fs.Var(&f.degraded, "allow-degraded", "probe even if `LAYER` is unavailable, as cordon run would")
	fs.DurationVar(&f.every, "every", 0, "run the battery again every `INTERVAL` (and at once when the profile file changes), recording each report and naming what changed since the last")
	fs.IntVar(&f.runs, "runs", 0, "with --every, stop after `N` runs (0: run until interrupted)")
}

func probeHost() probe.Host {
	h := sandbox.ProbeHost()
	name, _ := os.Hostname()
	return probe.Host{Name: name, Kernel: h.Kernel, Arch: h.Arch, Root: h.Root, LandlockABI: h.LandlockABI, Cgroup: h.Cgroup.Version}
}

// probeRunner runs the probes' sandboxes as cordon run would.
type probeRunner struct {
	e     *env
	allow map[string]bool
	// audit records every sandbox the probes build; nil in the hidden
	// supervisor, which is killed on purpose.
	audit *auditLog
	// setupErr is the first failure to build a sandbox: the probes could
	// not run, which is cordon's failure, not theirs.
	setupErr error
	// guard are the host files the sandboxes must not change (see
	// guarded).
	guard []string
}

// inside runs a battery inside a sandbox built from p and collects its
// results. The run's stderr (the proxy's denials, which the egress probes
// cause on purpose) is shown only when the run did not end cleanly.
func (r *probeRunner) inside(p *profile.Profile, targets *probe.Targets, flag, only string) ([]probe.Result, outcome.Outcome, error) {
	p = p.Clone()
	tj, _ := json.Marshal(targets)
	if p.Env.Set == nil {
		p.Env.Set = map[string]string{}
	}
	p.Env.Set[probe.EnvVar] = string(tj)
	args := []string{"cordon", hiddenProbe}
	if flag != "" {
		args = append(args, flag)
	}
	if only != "" {
		args = append(args, "--only", only)
	}
	var stderr bytes.Buffer
	var rs []probe.Result
	o, err := r.sandbox(p, args, func(r io.Reader) { rs, _ = probe.Parse(r) }, func(r io.Reader) { io.Copy(&stderr, r) })
	if err != nil || !o.Clean() {
		r.e.stderr.Write(stderr.Bytes())
	}
	return rs, o, err
}

// sandbox runs cordon (args) in a sandbox built from p; stdout and stderr
// read what it writes there, until it ends.
func (r *probeRunner) sandbox(p *profile.Profile, args []string, stdout, stderr func(io.Reader)) (outcome.Outcome, error) {
	return r.sandboxIn(p, args, true, nil, stdout, stderr, nil)
}

// sandboxIn is sandbox with stdin as the command's standard input; args
// are cordon's own (selfExec) or a command of the sandbox's; adjust, when
// set, changes the options before the run.
func (r *probeRunner) sandboxIn(p *profile.Profile, args []string, selfExec bool, stdin *os.File, stdout, stderr func(io.Reader), adjust func(*sandbox.Options)) (outcome.Outcome, error) {
	var files [2]*os.File
	var readers sync.WaitGroup
	for i, read := range []func(io.Reader){stdout, stderr} {
		rd, w, err := os.Pipe()
		if err != nil {
			return outcome.Outcome{}, err
		}
		defer w.Close()
		files[i] = w
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer rd.Close()
			read(rd)
			io.Copy(io.Discard, rd)
		}()
	}
	opts := sandbox.Options{
		Profile: p, Args: args, SelfExec: selfExec, AllowDegraded: r.allow,
		Cwd: r.e.cwd, LookupEnv: r.e.getenv, Stdin: stdin, Stdout: files[0], Stderr: files[1],
		Guard: r.guard, WalkIndex: walkIndexDir(r.e, p), JournalDir: journalDir(r.e, p),
	}
	if !selfExec {
		// A command of the sandbox's (the run tool's) keeps the agent's
		// caches; cordon's own (a probe, a built-in tool) needs none.
		opts.CacheRoot = cacheRoot(r.e, p)
	}
	if adjust != nil {
		adjust(&opts)
	}
	var a *auditor
	if r.audit != nil {
		a = r.audit.run(p)
	}
	if p.Workspace.Guarded() {
		// What the command wrote lands when it ends, as for cordon run.
		run, record := newRunID(), func(audit.Event) {}
		if a != nil {
			run, record = a.id, func(ev audit.Event) { a.log.Add(ev) }
		}
		release, err := guardLayer(r.e, p, "", run, record, time.Now().Add(-startSlack), &opts)
		if err != nil {
			return outcome.Outcome{}, err
		}
		defer release()
	}
	if a != nil {
		a.begin(p, "", args, r.e.cwd, r.e.getenv)
		a.watch(&opts)
	}
	o, err := sandbox.Run(opts)
	files[0].Close()
	files[1].Close()
	readers.Wait()
	if a != nil {
		o.Sandbox = a.id
		if aerr := a.end(o, false); aerr != nil && err == nil {
			err = fmt.Errorf("audit log: %w", aerr)
		}
	}
	return o, err
}

// Run runs an attack of a host-side probe; its stderr is dropped (the
// outcome says how it ended).
func (r *probeRunner) Run(p *profile.Profile, attack []string, stdout io.Writer) (outcome.Outcome, error) {
	copyTo := func(rd io.Reader) { io.Copy(stdout, rd) }
	o, err := r.sandbox(p, append([]string{"cordon", hiddenProbe, "--attack"}, attack...), copyTo, func(io.Reader) {})
	if err != nil && r.setupErr == nil {
		r.setupErr = err
	}
	return o, err
}

// Exec runs an attack of a host-side probe with the guards, resolver and
// stderr it asks for.
func (r *probeRunner) Exec(x probe.Exec) (outcome.Outcome, error) {
	to := func(w io.Writer) func(io.Reader) {
		if w == nil {
			w = io.Discard
		}
		return func(rd io.Reader) { io.Copy(w, rd) }
	}
	args := append([]string{"cordon", hiddenProbe, "--attack"}, x.Attack...)
	o, err := r.sandboxIn(x.Profile, args, true, nil, to(x.Stdout), to(x.Stderr), func(opts *sandbox.Options) {
		opts.Guard = append(slices.Clone(opts.Guard), x.Guard...)
		opts.Resolve = x.Resolve
	})
	if err != nil && r.setupErr == nil {
		r.setupErr = err
	}
	return o, err
}

// Start runs an attack under a cordon process of its own (the hidden
// subcommand hiddenSupervise), which reads the profile from its stdin.
func (r *probeRunner) Start(p *profile.Profile, attack []string, stdout io.Writer) (*exec.Cmd, error) {
	text, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	args := []string{hiddenSupervise}
	for layer := range r.allow {
		args = append(args, "--allow-degraded", layer)
	}
	cmd := exec.Command("/proc/self/exe", append(append(args, "--"), attack...)...)
	cmd.Dir = r.e.cwd
	cmd.Stdin = bytes.NewReader(text)
	cmd.Stdout = stdout
	return cmd, cmd.Start()
}

// Sweep removes what killed cordons left, as the next cordon does.
func (r *probeRunner) Sweep(p *profile.Profile) {
	for _, dir := range journalDirs(r.e, p) {
		journal.Sweep(dir, time.Now().Add(sweepWait))
	}
}

// hiddenSupervise is the subcommand Start runs.
const hiddenSupervise = "__probe-supervise"

// superviseCmd implements hiddenSupervise: `[--allow-degraded L]... --
// ATTACK...`, the profile as YAML on stdin.
func superviseCmd(e *env, args []string) int {
	var degraded list
	fs := newFlags(e, hiddenSupervise, hiddenSupervise+" -- ATTACK...")
	fs.Var(&degraded, "allow-degraded", "")
	if err := parseFlags(fs, args); err != nil {
		return fail(e, err)
	}
	allow, err := degradedLayers(degraded)
	if err != nil {
		return fail(e, err)
	}
	text, err := io.ReadAll(e.stdin)
	if err != nil {
		return fail(e, err)
	}
	p, err := profile.Parse("<probe profile>", text)
	if err != nil {
		return fail(e, err)
	}
	o, err := sandbox.Run(sandbox.Options{
		Profile: p, Args: append([]string{"cordon", hiddenProbe, "--attack"}, fs.Args()...), SelfExec: true, AllowDegraded: allow,
		Cwd: e.cwd, LookupEnv: e.getenv, Stdout: e.stdoutFile, Stderr: e.stderrFile, JournalDir: journalDir(e, p),
	})
	if err != nil {
		return fail(e, err)
	}
	return o.ExitCode
}

// outsideView picks a directory for the canary that no bind of the profile
// reaches, so that finding it means the view leaked.
func outsideView(p *profile.Profile, cwd string) string {
	var sources []string
	if ws := p.Workspace.Path; ws != "" {
		if !filepath.IsAbs(ws) {
			ws = filepath.Join(cwd, ws)
		}
		sources = append(sources, filepath.Clean(ws))
	}
	for _, m := range p.Mounts {
		sources = append(sources, m.Path)
	}
	for _, dir := range []string{os.TempDir(), "/var/tmp", "/dev/shm"} {
		inside := false
		for _, s := range sources {
			if dir == s || strings.HasPrefix(dir, s+"/") || strings.HasPrefix(s, dir+"/") {
				inside = true
			}
		}
		if !inside {
			return dir
		}
	}
	return os.TempDir()
}

// probeEvery runs the battery again and again: every interval, and at once
// when the profile file or the kernel changes. Each report is recorded
// (where cordon lint looks for the latest), and each run after the first
// names the probes whose status changed since the one before (--compare).
// It returns the status of the last run.
func probeEvery(e *env, args []string, profileFile, reports string, every time.Duration, runs int) int {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--every" || a == "-every" || a == "--runs" || a == "-runs":
			i++
		case strings.HasPrefix(a, "--every=") || strings.HasPrefix(a, "-every=") || strings.HasPrefix(a, "--runs=") || strings.HasPrefix(a, "-runs="):
		default:
			rest = append(rest, a)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	watched := func() string {
		var b strings.Builder
		if profileFile != "" {
			data, _ := hostfile.ReadFile(profileFile, 1<<20)
			b.Write(data)
		}
		release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
		b.Write(release)
		return b.String()
	}
	prev, code := "", 0
	for n := 1; runs == 0 || n <= runs; n++ {
		a := append(slices.Clone(rest), "--record", "--reports", reports)
		if prev != "" {
			a = append(a, "--compare", prev)
		}
		before := watched()
		fmt.Fprintf(e.stderr, "cordon: probe run %d, %s\n", n, time.Now().UTC().Format(time.RFC3339))
		code = probeCmd(e, a)
		if latest := newestReport(reports); latest != "" {
			// Kept apart, so that the next run compares with this one even
			// when they share a profile hash (and so a file).
			b, err := hostfile.ReadFile(latest, 0)
			if err == nil {
				prev = filepath.Join(reports, ".previous-run.json")
				hostfile.WriteFile(prev, b, 0o644)
			}
		}
		if runs != 0 && n == runs {
			break
		}
		deadline := time.Now().Add(every)
		for time.Now().Before(deadline) && watched() == before {
			select {
			case <-ctx.Done():
				return code
			case <-time.After(min(time.Second, time.Until(deadline))):
			}
		}
		if watched() != before {
			fmt.Fprintln(e.stderr, "cordon: the profile or the kernel changed: probing again now")
		}
	}
	return code
}

// newestReport is the report most recently written in dir.
func newestReport(dir string) string {
	ents, _ := os.ReadDir(dir)
	var best string
	var bestTime time.Time
	for _, ent := range ents {
		if !strings.HasSuffix(ent.Name(), ".json") || strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		if info, err := ent.Info(); err == nil && info.ModTime().After(bestTime) {
			best, bestTime = filepath.Join(dir, ent.Name()), info.ModTime()
		}
	}
	return best
}
