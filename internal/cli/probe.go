package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// probeCmd implements `cordon probe [flags]`: the escape probes, run in a
// sandbox built from the profile exactly as `cordon run` builds it. Exit
// status 0 only when every probe is contained.
func probeCmd(e *env, args []string) int {
	exe := sandbox.SealExecutable()
	defer exe.Close()
	fs := newFlags(e, "probe", "probe [flags]")
	var pf profileFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON (docs/probe.schema.json)")
	compare := fs.String("compare", "", "report the probes whose status changed since the JSON report `OLD`")
	only := fs.String("only", "", "run only the probes of `CATEGORY` ("+strings.Join(probe.Categories(probe.Battery()), ", ")+")")
	var degraded list
	fs.Var(&degraded, "allow-degraded", "probe even if `LAYER` is unavailable, as cordon run would")
	if err := fs.Parse(args); err != nil {
		return fail(e, err)
	}
	if *only != "" && !slices.Contains(probe.Categories(probe.Battery()), *only) {
		return fail(e, fmt.Errorf("--only: unknown category %q", *only))
	}
	p, err := pf.load(e)
	if err != nil {
		return fail(e, err)
	}
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
	tj, _ := json.Marshal(targets)
	if p.Env.Set == nil {
		p.Env.Set = map[string]string{}
	}
	p.Env.Set[probe.EnvVar] = string(tj)

	r, w, err := os.Pipe()
	if err != nil {
		return fail(e, err)
	}
	results := make(chan []probe.Result, 1)
	go func() {
		rs, _ := probe.Parse(r)
		io.Copy(io.Discard, r)
		results <- rs
	}()
	allow, err := degradedLayers(degraded)
	if err != nil {
		return fail(e, err)
	}
	args = []string{"cordon", hiddenProbe}
	if *only != "" {
		args = append(args, "--only", *only)
	}
	o, err := sandbox.Run(sandbox.Options{
		Profile: p, Exe: exe, Args: args, SelfExec: true, AllowDegraded: allow,
		Cwd: e.cwd, LookupEnv: e.getenv, Stdout: w, Stderr: e.stderrFile,
	})
	w.Close()
	rs := <-results
	r.Close()
	if err != nil {
		return fail(e, err)
	}
	if !o.Clean() {
		fmt.Fprintf(e.stderr, "cordon: the probe run did not end cleanly: %s\n", o.Message)
	}
	if *compare != "" {
		old, err := probe.LoadReport(*compare)
		if err != nil {
			return fail(e, fmt.Errorf("--compare: %w", err))
		}
		probe.WriteChanges(e.stderr, probe.Compare(old.Results, rs))
	}
	if *asJSON {
		h := sandbox.ProbeHost()
		shown, _ := yaml.Marshal(p)
		sum := sha256.Sum256(shown)
		out, _ := json.MarshalIndent(probe.Report{
			Cordon:        Version,
			Host:          probe.Host{Kernel: h.Kernel, Arch: h.Arch, Root: h.Root, LandlockABI: h.LandlockABI, Cgroup: h.Cgroup.Version},
			ProfileSHA256: hex.EncodeToString(sum[:]),
			Results:       rs,
			Summary:       probe.Summarize(rs),
		}, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCATEGORY\tSTATUS\tEVIDENCE")
		for _, res := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.ID, res.Category, res.Status, res.Evidence)
		}
		tw.Flush()
		counts := map[probe.Status]int{}
		for _, res := range rs {
			counts[res.Status]++
		}
		fmt.Fprintf(e.stdout, "%d probes: %d contained, %d escaped, %d error\n", len(rs), counts[probe.Contained], counts[probe.Escaped], counts[probe.Error])
	}
	if !probe.AllContained(rs) || !o.Clean() {
		return 1
	}
	return 0
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
