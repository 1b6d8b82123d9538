package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/journal"
	"github.com/cordon-sandbox/cordon/internal/landlock"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// doctorCmd implements `cordon doctor [--json]`: what this host supports and
// what cordon will do here, checked by building one real sandbox. Exit status
// 0 when `cordon run` can contain commands with every layer, 1 otherwise.
func doctorCmd(e *env, args []string) int {
	fs := newFlags(e, "doctor", "doctor [--json]")
	asJSON := doctorFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return fail(e, err)
	}
	h := sandbox.ProbeHost()
	ready := h.UserNamespaces == "" && h.Seccomp == "" && h.LandlockABI >= landlock.MinABI && h.Cgroup.Delegated
	// The layers exist: build a real sandbox to be sure they work together.
	trial := "not run: a layer is missing"
	if h.UserNamespaces == "" && h.Seccomp == "" && h.LandlockABI >= landlock.MinABI {
		trial = "ok"
		// Cgroups are reported above; the trial checks the containment.
		if err := sandbox.Trial(profile.Default(), map[string]bool{sandbox.LayerCgroup: true}); err != nil {
			trial, ready = err.Error(), false
		}
	}
	ct := checkContainer("/", h, trial, e.cwd, sandbox.IdmapCheck)
	ready = ready && ct.ok()
	lo := sweepLeftovers(e)
	if *asJSON {
		out, _ := json.MarshalIndent(struct {
			sandbox.Host
			CorePattern string           `json:"core_pattern"`
			Trial       string           `json:"trial"`
			Ready       bool             `json:"ready"`
			Container   *containerReport `json:"container,omitempty"`
			// Toolchains: what cordon run -- CMD binds for a few commands.
			Toolchains []toolchain.Entry `json:"toolchains"`
			Leftovers  leftovers         `json:"leftovers"`
		}{h, corePattern(), trial, ready, ct, doctorToolchains(e), lo}, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
	} else {
		printDoctor(e, h, trial, ready, ct, lo)
	}
	if !ready {
		return 1
	}
	return 0
}

func printDoctor(e *env, h sandbox.Host, trial string, ready bool, ct *containerReport, lo leftovers) {
	w := e.stdout
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "  %-18s %s\n", k, fmt.Sprintf(format, args...)) }
	missing := func(layer, why string) string {
		return fmt.Sprintf("MISSING (%s): cordon run refuses; --allow-degraded=%s runs without it", why, layer)
	}

	fmt.Fprintln(w, "host")
	row("kernel", "%s (%s)", h.Kernel, h.Arch)
	if h.Root {
		row("running as", "root")
	} else {
		row("running as", "uid %d (rootless)", h.UID)
	}
	if h.UserNamespaces == "" {
		row("user namespaces", "yes")
	} else {
		row("user namespaces", "NO: %s", h.UserNamespaces)
	}
	if h.LandlockABI > 0 {
		row("landlock", "ABI %d", h.LandlockABI)
	} else {
		row("landlock", "no")
	}
	if h.Seccomp == "" {
		row("seccomp", "filters yes, user notification %s", yesNo(h.SeccompNotify))
	} else {
		row("seccomp", "NO: %s", h.Seccomp)
	}
	cg := h.Cgroup.Version
	if len(h.Cgroup.V1Controllers) > 0 {
		cg += ", v1 controllers: " + strings.Join(h.Cgroup.V1Controllers, " ")
	}
	if len(h.Cgroup.V2Controllers) > 0 {
		cg += ", v2 controllers: " + strings.Join(h.Cgroup.V2Controllers, " ")
	}
	row("cgroups", "%s; delegated to cordon: %s", cg, yesNo(h.Cgroup.Delegated))

	fmt.Fprintln(w, "\nwhat cordon will do here")
	if h.UserNamespaces == "" {
		row("namespaces", "user, mount, pid, net, ipc, uts, cgroup; a new root with pivot_root")
	} else {
		row("namespaces", "cannot run: user namespaces are required and cannot be skipped")
	}
	if h.Root {
		row("sandbox user", "the profile's user (uid 1000 by default) inside, mapped to the workspace owner's host ids, or to nobody (65534) with an idmapped workspace when root owns it; never host root; supplementary groups dropped")
	} else {
		row("sandbox user", "the profile's user (uid 1000 by default) inside, mapped to your uid %d; your supplementary groups stay in effect for host files (the kernel does not let an unprivileged user drop them)", h.UID)
	}
	if h.LandlockABI >= landlock.MinABI {
		row("landlock", "enforced with ABI %d: read beneath the view, write only where the profile allows", h.LandlockABI)
	} else if h.LandlockABI > 0 {
		row("landlock", "ABI %d ONLY: cordon run refuses (it needs ABI %d); --allow-degraded=landlock enforces what ABI %d offers", h.LandlockABI, landlock.MinABI, h.LandlockABI)
	} else {
		row("landlock", "%s", missing(sandbox.LayerLandlock, "kernel has no Landlock"))
	}
	if h.Seccomp == "" {
		row("seccomp", "enforced: default-deny allowlist, foreign architectures killed")
	} else {
		row("seccomp", "%s", missing(sandbox.LayerSeccomp, h.Seccomp))
	}
	row("capabilities", "all dropped (effective, permitted, inheritable, bounding, ambient); no_new_privs")
	row("network", "none by default: a private network namespace with only lo; destinations a profile or --allow names go through cordon's egress proxy (HTTP, CONNECT, SOCKS5 at 127.0.0.1:3128 inside), nothing else")
	if h.Cgroup.Delegated {
		row("limits", "memory (swap included), pids, cpus and total cpu_time by cgroup %s; cpu_time, file_size and open_files per process by rlimit; wall and output by cordon; tmp_size by tmpfs", h.Cgroup.Using)
	} else {
		row("limits", "NO CGROUP (%s): cordon run refuses; --allow-degraded=cgroup runs with cpus UNENFORCED, and memory (RLIMIT_DATA), pids and cpu_time per process by rlimit; file_size and open_files (rlimit), wall and output (cordon) and tmp_size (tmpfs) as always", h.Cgroup.Problem)
		for i, fix := range cgroupFix(h, systemdHost()) {
			row(map[bool]string{true: "to fix"}[i == 0], "%s", fix)
		}
	}

	switch h.SandboxProgram {
	case "lean":
		row("sandbox program", "lean: each sandbox's init runs cordon's small sandbox program, from a copy only root may write (as root: one per host, in /run/cordon) or sealed in memory")
	case "cordon":
		row("sandbox program", "cordon itself: this build carries no lean sandbox program (build it with build.sh); each sandbox starts slower and touches more memory")
	default:
		row("sandbox program", "%s", h.SandboxProgram)
	}
	row("crash dumps", "%s", crashDumps(corePattern()))
	row("audit log", "%s", auditSetting())
	// The trial ran without the cgroup that cordon run would refuse to
	// go without.
	withoutCgroup := trial == "ok" && !h.Cgroup.Delegated
	if withoutCgroup {
		row("trial sandbox", "%s", trialWithoutCgroup)
	} else {
		row("trial sandbox", "%s", trial)
	}
	row("leftovers", "%s", lo)
	printToolchains(w, doctorToolchains(e))
	printContainer(w, ct)

	fmt.Fprintln(w)
	if ready {
		fmt.Fprintln(w, "ready: cordon run contains commands with every layer on this host")
	} else if withoutCgroup && ct.onlyLacksCgroup() {
		fmt.Fprintln(w, "not ready: cordon run refuses without a cgroup (see limits and to fix); with --allow-degraded=cgroup it runs, as the trial sandbox did, with the limits it names")
	} else {
		fmt.Fprintln(w, "not ready: see the lines marked NO, MISSING or ONLY, and the trial sandbox")
	}
}

// trialWithoutCgroup is how the trial sandbox's "ok" reads where it ran
// without the cgroup cordon run would refuse to go without.
const trialWithoutCgroup = "ok, without a cgroup (as cordon run --allow-degraded=cgroup runs here)"

// leftovers is what cordons killed earlier had left (their sandboxes'
// cgroups and placeholders, as the journal names them): Removed by this
// doctor's sweep, Left what is still there (a cgroup whose processes did
// not end in time).
type leftovers struct {
	Journal string         `json:"journal"`
	Removed []journal.Left `json:"removed"`
	Left    []journal.Left `json:"left"`
	Error   string         `json:"error,omitempty"`
}

func (lo leftovers) String() string {
	if lo.Journal == "" {
		return "unknown: neither cordon's state directory nor a runtime directory of yours can hold its journal"
	}
	var parts []string
	for _, l := range lo.Removed {
		parts = append(parts, "removed "+l.String())
	}
	for _, l := range lo.Left {
		parts = append(parts, "STILL THERE: "+l.String())
	}
	if lo.Error != "" {
		parts = append(parts, "ERROR: "+lo.Error)
	}
	if len(parts) == 0 {
		return "none: no cordon killed earlier left anything (journal " + lo.Journal + ")"
	}
	return strings.Join(parts, "; ")
}

// sweepLeftovers sweeps every journal directory cordon run may write (see
// package journal), whatever a profile's sandbox would see from here (the
// default profile's workspace is the working directory, which may hold
// the state directory), and lists what it removed and what is left.
func sweepLeftovers(e *env) leftovers {
	dirs := journalDirs(e, nil)
	lo := leftovers{Removed: []journal.Left{}, Left: []journal.Left{}}
	if len(dirs) == 0 {
		return lo
	}
	lo.Journal = dirs[0]
	var errs []error
	for _, dir := range dirs {
		removed, err := journal.Sweep(dir, time.Now().Add(sweepWait))
		lo.Removed = append(lo.Removed, removed...)
		left, perr := journal.Pending(dir)
		lo.Left = append(lo.Left, left...)
		errs = append(errs, err, perr)
	}
	if err := errors.Join(errs...); err != nil {
		lo.Error = err.Error()
	}
	return lo
}

// corePattern is the host's kernel.core_pattern, "" when unreadable.
func corePattern() string {
	b, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	return strings.TrimSpace(string(b))
}

// crashDumps says what a crash in a sandbox leaves. RLIMIT_CORE is 0 in
// every sandbox, so no core file is written; but when core_pattern pipes
// crashes to a program, the kernel starts that program as root in the
// host's namespaces for every crash, a sandboxed one too, whatever the
// limit, and hands it the crashed process. Helpers have been exploited
// that way (apport: CVE-2020-15702, CVE-2021-25682); cordon cannot stop
// the kernel from starting them, so it says so.
func crashDumps(pattern string) string {
	if helper, ok := strings.CutPrefix(pattern, "|"); ok {
		prog, _, _ := strings.Cut(strings.TrimSpace(helper), " ")
		return fmt.Sprintf("no core file is written (RLIMIT_CORE 0), but this host's core_pattern pipes every crash to %s, which the kernel starts as root on the host for a crash in a sandbox too: keep that helper up to date, or set kernel.core_pattern to a file name", prog)
	}
	return "none: RLIMIT_CORE is 0 in every sandbox, and core_pattern writes files, no helper"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// auditSetting says where runs are recorded, whether cordon can write
// there (runs refuse otherwise), and whether checkpoints are signed.
func auditSetting() string {
	cfg, err := config.Load()
	if err != nil {
		return "NO: " + err.Error()
	}
	dir := filepath.Dir(cfg.Audit.Log)
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			if unix.Access(d, unix.W_OK) != nil {
				return fmt.Sprintf("%s: NO: %s is not writable; cordon run refuses (set another with --audit-log, CORDON_AUDIT_LOG or %s)", cfg.Audit.Log, d, config.Path())
			}
			break
		}
		if d == "/" {
			break
		}
	}
	signed := "checkpoints unsigned (cordon audit keygen)"
	if cfg.Audit.Key != "" {
		signed = "checkpoints signed with " + cfg.Audit.Key
	}
	return cfg.Audit.Log + "; " + signed
}

// doctorFlags registers cordon doctor's flags.
func doctorFlags(fs *flag.FlagSet) (asJSON *bool) {
	return fs.Bool("json", false, "print the report as JSON")
}
