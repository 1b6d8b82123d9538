package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/hostfile"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// runCmd implements `cordon run [flags] -- CMD [ARGS...]`. It exits with the
// outcome's exit status: the command's own when it exited by itself.
func runCmd(e *env, args []string) int {
	// Copy cordon's binary for the sandbox's init while the rest is read.
	exe := sandbox.SealExecutable()
	defer exe.Close()

	fs := newFlags(e, "run", "run [flags] -- CMD [ARGS...]")
	var f runFlags
	f.register(fs)
	pf, asJSON, outFile, verbose, auditLog, serverURL := &f.pf, &f.json, &f.outcome, &f.verbose, &f.auditLog, &f.server
	if err := parseFlags(fs, args); err != nil {
		return fail(e, err)
	}
	degraded := f.degraded
	// The command's output reaches cordon's stderr through lines, and
	// every line of cordon's own starts on a line of its own.
	lines := termsafe.NewStream(e.stderr)
	cmdStdout := e.stdout
	if sandbox.SameFile(e.stdoutFile, e.stderrFile) {
		cmdStdout = lines
	}
	e = withStderr(e, lines.Own())
	if fs.NArg() == 0 {
		fs.Usage()
		return fail(e, fmt.Errorf("run: no command given"))
	}
	var out *hostfile.Target
	if *outFile != "" {
		t, err := outcomeTarget(e, *outFile)
		if err != nil {
			return fail(e, err)
		}
		defer t.Close()
		out = t
	}
	if *serverURL != "" {
		if pf.changed() || len(degraded) > 0 || *auditLog != "" || *verbose {
			return fail(e, fmt.Errorf("run --server: the server chooses the profile (the token's agent's), its layers and its audit log; drop --profile, --workspace, --ro, --rw, --limit, --allow, --toolchain, --transparent, --allow-degraded, --audit-log and -v"))
		}
		o, err := runRemote(e, *serverURL, fs.Args(), cmdStdout, lines)
		if err != nil {
			return fail(e, err)
		}
		report(e, o, true, *asJSON, out)
		reportRemoteChanges(e, o)
		return o.ExitCode
	}
	pf.homeFirst = true
	p, allow, al, err := pf.open(e, degraded, *auditLog)
	if err != nil {
		return fail(e, err)
	}
	subdir := repoWorkspace(e, pf, p)
	if out != nil {
		// Now that the view is known: the outcome is written outside it.
		if where := visibleIn(e, p, e.cwd, out.Path()); where != "" {
			return fail(e, fmt.Errorf("--outcome %s is inside %s, which the sandbox can see (it could put a link or a FIFO there): write it elsewhere", *outFile, where))
		}
	}
	tc, err := runToolchains(e, p, fs.Args())
	if err != nil {
		return fail(e, err)
	}
	a := al.run(p)
	if p.Workspace.Reviewed() {
		if err := changesOutsideView(e, p); err != nil {
			return fail(e, err)
		}
	}
	a.begin(p, pf.file, fs.Args(), e.cwd, e.getenv)
	opts := sandbox.Options{
		Profile:       p,
		Exe:           exe,
		Args:          fs.Args(),
		AllowDegraded: allow,
		Cwd:           e.cwd,
		Subdir:        subdir,
		LookupEnv:     e.getenv,
		Stdin:         e.stdin,
		Stdout:        e.stdoutFile,
		Stderr:        e.stderrFile,
		StderrLines:   lines,
		Toolchains:    tc,
	}
	if pf.file != "" {
		opts.ProfileFile = pf.abs(e, pf.file)
	}
	opts.WalkIndex = walkIndexDir(e, p)
	opts.CacheRoot = cacheRoot(e, p)
	// What a cordon killed before this one left goes first.
	jdirs := journalDirs(e, p)
	if len(jdirs) > 0 {
		opts.JournalDir = jdirs[0]
	}
	sweepJournal(e, jdirs...)
	opts.Guard = guarded(opts.ProfileFile)
	switch {
	case p.Workspace.Guarded():
		release, err := guardLayer(e, p, opts.ProfileFile, a.id, func(ev audit.Event) { a.log.Add(ev) }, time.Now().Add(-startSlack), &opts)
		if err != nil {
			return fail(e, err)
		}
		defer release()
	case p.Workspace.Reviewed():
		// Host files changed from now on are conflicts when applied.
		// A file's change time comes from the kernel's coarse clock, a tick
		// behind: the run starts for conflicts a little earlier than now.
		opts.Review = keepChanges(e, p, opts.ProfileFile, a.id, time.Now().Add(-startSlack))
	}
	a.watch(&opts)
	o, err := sandbox.Run(opts)
	if err != nil {
		fail(e, err)
		for _, fix := range cgroupAdvice(err) {
			fmt.Fprintf(e.stderr, "cordon: to fix: %s\n", fix)
		}
	}
	if hint := notFoundHint(e, fs.Args(), o); hint != "" {
		o.Message += "; " + hint
		fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Line(hint))
	}
	o.Notes = append(o.Notes, pf.lintNotes()...)
	if opts.JournalDir == "" {
		o.Notes = append(o.Notes, "cordon kept no journal of what it made on the host for this run (neither its state directory nor a runtime directory of yours would do): had it been killed, its cgroup and placeholders would have stayed")
	}
	if len(p.Caches) > 0 && opts.CacheRoot == "" {
		o.Notes = append(o.Notes, fmt.Sprintf("the profile's caches are not kept on this run: cordon's state directory (%s) is in the sandbox's view, or cannot be made", config.StateDir()))
	}
	o.Sandbox = a.id
	if aerr := a.end(o, sandbox.UsesTerminal(e.stdin, e.stdoutFile)); aerr != nil {
		// The run happened but is not on the record: that is not success.
		report(e, o, false, *asJSON, out)
		return fail(e, fmt.Errorf("audit log: %w (this run is not recorded)", aerr))
	}
	al.retain(e)
	warnDegraded(e, o)
	if !*asJSON {
		for _, ob := range o.Obeyed {
			fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Line(ob.Line()))
		}
		if o.ObeyedUnchecked != "" {
			fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Line(o.ObeyedUnchecked))
		}
	}
	if *verbose {
		fmt.Fprintf(e.stderr, "cordon: landlock ABI %d\n", o.LandlockABI)
		writeNotes(e.stderr, o.Notes)
	}
	report(e, o, err == nil, *asJSON, out)
	if c := o.Changes; c != nil && err == nil {
		if c.Error != "" {
			code := fail(e, fmt.Errorf("%s", c.Error))
			if o.Limit != nil {
				// The limit ended the run, and is what its status says.
				return o.ExitCode
			}
			return code
		}
		switch {
		case p.Workspace.Guarded():
			reportLanded(e, c)
		case c.Entries == 0:
			fmt.Fprintf(e.stderr, "cordon: the run changed nothing in the workspace\n")
		default:
			fmt.Fprintf(e.stderr, "cordon: %d change(s) wait for review: cordon changes %s (then cordon apply %s, or cordon discard %s)\n", c.Entries, c.Set, c.Set, c.Set)
		}
	}
	return o.ExitCode
}

// notFoundHint says, for a command the sandbox could not find, where your
// PATH finds it on this host and the flag that binds it: a command is
// found inside only where the profile's view has it. "" when the command
// was found, is given as a path, or is not on your PATH either.
func notFoundHint(e *env, argv []string, o outcome.Outcome) string {
	if len(argv) == 0 || strings.ContainsRune(argv[0], '/') || o.ExitCode != 127 || !strings.Contains(o.Message, "command not found") {
		return ""
	}
	name := argv[0]
	path, _ := e.getenv("PATH")
	f := toolchain.LookPath(name, path)
	if f == "" {
		return ""
	}
	return fmt.Sprintf("%s is %s on this host, outside the sandbox's view or its PATH: --toolchain %s binds its toolchain and puts it first on the PATH (or --ro %s, and run %s)", name, f, name, filepath.Dir(f), f)
}

// startSlack is how much earlier than its start a reviewed run counts as
// started, for conflicts: more than a tick of the kernel's coarse clock.
const startSlack = 20 * time.Millisecond

// runFlags are cordon run's flags.
type runFlags struct {
	pf                        profileFlags
	degraded                  list
	json, verbose             bool
	outcome, auditLog, server string
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.pf.register(fs)
	f.pf.registerLintGate(fs)
	fs.Var(&f.degraded, "allow-degraded", "run even if `LAYER` ("+strings.Join(sandbox.DegradableLayers, ", ")+") is unavailable; repeatable or comma-separated")
	fs.BoolVar(&f.json, "json", false, "print the outcome as JSON on stderr after the command's output")
	fs.StringVar(&f.outcome, "outcome", "", "write the outcome as JSON to `FILE`")
	fs.BoolVar(&f.verbose, "v", false, "report the layers in force on stderr")
	fs.StringVar(&f.auditLog, "audit-log", "", "append this run's audit events to `FILE` (default: the configuration's, see cordon audit)")
	fs.StringVar(&f.server, "server", "", "run the command in a sandbox of cordon serve at `URL`, with the token in $CORDON_TOKEN: the server's profile for the token's agent applies")
}

// report prints the outcome: as JSON when asked, else one line when the run
// did not end cleanly (a sandbox error has already been printed).
func report(e *env, o outcome.Outcome, printSummary, asJSON bool, file *hostfile.Target) {
	if file != nil {
		b, _ := json.MarshalIndent(o, "", "  ")
		if err := file.Write(append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(e.stderr, "cordon: writing the outcome: %v\n", err)
		}
	}
	var line string
	switch {
	case asJSON:
		// The outcome may quote what the sandbox chose (a file's name, an
		// interpreter's path): no character of it acts on the terminal.
		b, _ := json.Marshal(o)
		line = string(termsafe.JSON(b))
	case printSummary && !o.Clean():
		line = o.Summary()
	default:
		return
	}
	if sandbox.IsTerminal(e.stderrFile) {
		// The command's output may have left the terminal hiding text
		// (SGR 8) or in colours of its choosing: cordon's own line is
		// shown as written.
		line = resetTerminal + line
	}
	// One write: on a line of its own (see withStderr), whole.
	fmt.Fprintln(e.stderr, line)
}

// withStderr returns a copy of e whose stderr is w.
func withStderr(e *env, w io.Writer) *env {
	c := *e
	c.stderr = w
	return &c
}

// resetTerminal resets a terminal's character attributes (SGR 0) and character set (G0 to ASCII).
const resetTerminal = "\x1b[0m\x1b(B"

// outcomeTarget opens the directory of the outcome file before the sandbox
// starts, refusing any symbolic link on the way; the outcome is written
// into that directory, whatever its path names by then, and never through
// a link, FIFO or hard link found at the file's name (see hostfile).
func outcomeTarget(e *env, file string) (*hostfile.Target, error) {
	path := file
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.cwd, path)
	}
	t, err := hostfile.Prepare(path)
	if err != nil {
		return nil, fmt.Errorf("--outcome: %w", err)
	}
	return t, nil
}

// warnDegraded says which layers the run went without and, without a
// cgroup, how each limit that needed one was enforced instead.
func warnDegraded(e *env, o outcome.Outcome) {
	for _, layer := range o.Degraded {
		if layer != sandbox.LayerCgroup {
			fmt.Fprintf(e.stderr, "cordon: warning: ran without full %s, as --allow-degraded asked\n", layer)
			continue
		}
		var each []string
		for _, l := range o.Limits {
			switch {
			case l.EnforcedBy == "unenforced":
				each = append(each, fmt.Sprintf("%s %s UNENFORCED", l.Name, l.Value))
			case l.Name == "memory" && l.EnforcedBy == outcome.PrivateMemoryRlimit:
				each = append(each, fmt.Sprintf("memory %s UNENFORCED for the sandbox: RLIMIT_DATA bounds only each process's private memory (not shared mappings, memfd or tmpfs)", l.Value))
			case l.Name == "pids" && l.EnforcedBy == "rlimit":
				each = append(each, fmt.Sprintf("pids %s only per user (RLIMIT_NPROC)", l.Value))
			case l.Name == "cpu_time" && l.EnforcedBy == "rlimit":
				each = append(each, fmt.Sprintf("cpu_time %s only per process (RLIMIT_CPU)", l.Value))
			}
		}
		fmt.Fprintf(e.stderr, "cordon: warning: ran without a cgroup, as --allow-degraded asked: %s; `cordon doctor` shows how to delegate one\n", strings.Join(each, "; "))
	}
}

// degradedLayers reads --allow-degraded values: layer names, repeated or
// comma-separated.
func degradedLayers(values list) (map[string]bool, error) {
	allow := map[string]bool{}
	for _, v := range values {
		for _, layer := range strings.Split(v, ",") {
			if !slices.Contains(sandbox.DegradableLayers, layer) {
				return nil, fmt.Errorf("--allow-degraded: unknown layer %q (known: %s)", layer, strings.Join(sandbox.DegradableLayers, ", "))
			}
			allow[layer] = true
		}
	}
	return allow, nil
}

// guarded are the host files no sandbox may change, kept read-only where
// they are inside a writable part of its view: the profile it runs, that
// profile's approval record, and cordon's configuration (which names the
// audit log and its key).
func guarded(profileFile string) []string {
	g := []string{config.Path()}
	if profileFile != "" {
		g = append(g, profileFile, approval.PathFor(profileFile))
	}
	for i, p := range g {
		if abs, err := filepath.Abs(p); err == nil {
			g[i] = abs
		}
	}
	return g
}

// writeNotes writes an outcome's notes, one a line. A note may quote what
// the host or a sandbox chose (a directory's name, a version file's path):
// no control character of it reaches the terminal.
func writeNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "cordon: note: %s\n", termsafe.Line(n))
	}
}

// cacheRoot is where cordon keeps each agent's caches (see package
// cache): "" when p names none, or a sandbox of p could see them.
func cacheRoot(e *env, p *profile.Profile) string {
	if len(p.Caches) == 0 {
		return ""
	}
	return cacheDir(e, p, "caches")
}

// walkIndexDir is where cordon keeps what its searches of the trees in p's
// view learned (see sandbox.Options.WalkIndex).
func walkIndexDir(e *env, p *profile.Profile) string { return cacheDir(e, p, "walk") }

// cacheDir is the directory name of cordon's state, made if need be, where
// it keeps what a search learned for the next one: "" (nothing kept) where
// a sandbox of p could see it, since what is kept says what needs no
// second look.
func cacheDir(e *env, p *profile.Profile, name string) string {
	dir := filepath.Join(config.StateDir(), name)
	if visibleIn(e, p, e.cwd, filepath.Join(dir, "entry")) != "" || os.MkdirAll(dir, 0o700) != nil {
		return ""
	}
	return dir
}
