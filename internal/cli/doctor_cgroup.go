package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// cgroupFix returns the commands that give cordon a cgroup of its own on
// this host, when none is delegated: what an administrator runs once, or
// how a user of a systemd host starts cordon. Empty when cordon cannot
// tell.
func cgroupFix(h sandbox.Host, systemd bool) []string {
	if h.Cgroup.Delegated {
		return nil
	}
	var out []string
	v1 := slices.DeleteFunc(slices.Clone(h.Cgroup.V1Controllers), func(c string) bool {
		return c != "memory" && c != "pids" && c != "cpu" && c != "cpuacct"
	})
	switch {
	case h.Root && len(v1) == 0 && h.Cgroup.Version == "v2":
		out = append(out, "as root, cordon needs a writable cgroup v2 tree at /sys/fs/cgroup with the memory, pids and cpu controllers; in a container, see docs/CONTAINERS.md")
	case h.Root:
		out = append(out, "as root, cordon needs writable cgroup v1 hierarchies for memory, pids and cpu under /sys/fs/cgroup; in a container, see docs/CONTAINERS.md")
	case len(v1) > 0:
		// The v1 controllers are what cordon uses here; systemd does not
		// delegate them to users, an administrator does, for one shell
		// and what it starts.
		out = append(out, fmt.Sprintf(`as root, for your current shell and what it starts: sudo sh -c "for c in %s; do d=/sys/fs/cgroup/\$c/cordon-%d; mkdir -p \$d && chown -R %d \$d && echo $$ > \$d/cgroup.procs; done"`,
			strings.Join(v1, " "), h.UID, h.UID))
	case systemd:
		out = append(out, "start cordon in a cgroup systemd delegates to you: systemd-run --user --scope -p Delegate=yes -- cordon run ... (or start your agent that way; its cordon runs inherit the delegation)")
	default:
		out = append(out, fmt.Sprintf("as root, delegate a cgroup v2 subtree to uid %d with the memory, pids and cpu controllers enabled above it, and start cordon alone in it (see docs/PROFILES.md, Limits)", h.UID))
	}
	return out
}

// cgroupAdvice is what gives cordon a cgroup when err is a run refused
// for want of one, as doctor's "to fix" says it (in a container, the
// error names the runtime's flags too, as doctor's container section).
func cgroupAdvice(err error) []string {
	var se *sandbox.SetupError
	if !errors.As(err, &se) || se.Stage != sandbox.LayerCgroup || !errors.Is(se.Err, cgroup.ErrNotDelegated) {
		return nil
	}
	return cgroupFix(sandbox.ProbeHost(), systemdHost())
}

// systemdHost reports whether systemd is the host's service manager.
func systemdHost() bool {
	fi, err := os.Stat("/run/systemd/system")
	return err == nil && fi.IsDir()
}
