package cli

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// runCmd implements `cordon run [flags] -- CMD [ARGS...]`.
func runCmd(e *env, args []string) int {
	// Copy cordon's binary for the sandbox's init while the rest is read.
	exe := sandbox.SealExecutable()
	defer exe.Close()
	fs := newFlags(e, "run", "run [flags] -- CMD [ARGS...]")
	var pf profileFlags
	pf.register(fs)
	var degraded list
	fs.Var(&degraded, "allow-degraded", "run even if `LAYER` ("+strings.Join(sandbox.DegradableLayers, ", ")+") is unavailable; repeatable or comma-separated")
	verbose := fs.Bool("v", false, "report the layers in force on stderr")
	if err := fs.Parse(args); err != nil {
		return fail(e, err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fail(e, fmt.Errorf("run: no command given"))
	}
	allow := map[string]bool{}
	for _, v := range degraded {
		for _, layer := range strings.Split(v, ",") {
			if !slices.Contains(sandbox.DegradableLayers, layer) {
				return fail(e, fmt.Errorf("--allow-degraded: unknown layer %q (known: %s)", layer, strings.Join(sandbox.DegradableLayers, ", ")))
			}
			allow[layer] = true
		}
	}
	p, err := pf.load(e)
	if err != nil {
		return fail(e, err)
	}
	res, err := sandbox.Run(sandbox.Options{
		Profile:       p,
		Exe:           exe,
		Args:          fs.Args(),
		AllowDegraded: allow,
		Cwd:           e.cwd,
		LookupEnv:     e.getenv,
		Stdin:         e.stdin,
		Stdout:        e.stdoutFile,
		Stderr:        e.stderrFile,
	})
	if err != nil {
		return fail(e, err)
	}
	for _, layer := range res.Degraded {
		fmt.Fprintf(e.stderr, "cordon: warning: ran without full %s, as --allow-degraded asked\n", layer)
	}
	if *verbose {
		fmt.Fprintf(e.stderr, "cordon: landlock ABI %d\n", res.LandlockABI)
		for _, n := range res.Notes {
			fmt.Fprintf(e.stderr, "cordon: note: %s\n", n)
		}
	}
	switch {
	case res.ExecError != "":
		fmt.Fprintf(e.stderr, "cordon: %s\n", res.ExecError)
		return res.ExitCode
	case res.Signal != 0:
		fmt.Fprintf(e.stderr, "cordon: command killed by signal %d (%s)\n", res.Signal, unix.SignalName(unix.Signal(res.Signal)))
		return 128 + res.Signal
	}
	return res.ExitCode
}
