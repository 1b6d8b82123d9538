// Package drift checks, while a sandbox runs, that it is still contained
// as it was built. A sandbox set up correctly can end a long task less
// contained than it began if something around it changes: a cgroup limit
// raised from the host, a mount added into its namespace, the profile it
// was built from edited, a process that escaped its namespaces or lost its
// seccomp filter. Capture reads what can be read back of a running
// sandbox; Compare names what changed since the baseline; Unconfined names
// the sandbox's processes that are no longer confined as the command was.
package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
)

// State is what a running sandbox looks like from the host.
type State struct {
	// Namespaces are init's namespace identities ("net" -> "net:[4026...]").
	Namespaces map[string]string
	// Mounts is the SHA-256 of the sandbox's mount table (init's
	// mountinfo).
	Mounts string
	// mountLines are the mount table's lines by mount ID.
	mountLines map[string]mountLine
	// Limits are the cgroup's limit files and their values.
	Limits map[string]string
	// Profile is the SHA-256 of the profile file, "" without one.
	Profile string
	// Egress is a digest of the egress rules in force, "" without network.
	Egress string
}

// Sources are where Capture reads what is not in /proc.
type Sources struct {
	// Limits reads the cgroup's limit files; nil without a cgroup.
	Limits func() (map[string]string, error)
	// ProfileFile is the profile's path ("" for the embedded default).
	ProfileFile string
	// Egress returns the egress rules in force, in a stable text; nil
	// without network.
	Egress func() []byte
}

// namespaces are the namespace kinds compared.
var namespaces = []string{"mnt", "pid", "net", "ipc", "uts", "user", "cgroup"}

// Capture reads the state of the sandbox whose init is pid.
func Capture(pid int, src Sources) (State, error) {
	s := State{Namespaces: map[string]string{}}
	for _, ns := range namespaces {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil {
			return s, fmt.Errorf("init's %s namespace: %w", ns, err)
		}
		s.Namespaces[ns] = l
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return s, fmt.Errorf("the sandbox's mount table: %w", err)
	}
	s.Mounts = digest(mi)
	s.mountLines = parseMounts(mi)
	if src.Limits != nil {
		if s.Limits, err = src.Limits(); err != nil {
			return s, fmt.Errorf("the cgroup's limits: %w", err)
		}
	}
	if src.Egress != nil {
		s.Egress = digest(src.Egress())
	}
	if profileFile := src.ProfileFile; profileFile != "" {
		// Never through a link, never a FIFO or a device, never more than
		// a profile's worth: the file may be where a sandbox could write.
		b, err := hostfile.ReadFile(profileFile, 1<<20)
		if err != nil {
			s.Profile = "unreadable: " + err.Error()
		} else {
			s.Profile = digest(b)
		}
	}
	return s, nil
}

// mountLine is one line of mountinfo.
type mountLine struct {
	parent, text string
	readOnly     bool
}

// parseMounts reads mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS ...".
func parseMounts(mi []byte) map[string]mountLine {
	out := map[string]mountLine{}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		out[f[0]] = mountLine{parent: f[1], text: line, readOnly: slices.Contains(strings.Split(f[5], ","), "ro")}
	}
	return out
}

// onlyDetached reports whether the mount table changed only by losing
// read-only mounts that sat on read-only mounts, or by such mounts' files
// being deleted: what the kernel shows in every namespace when the host
// replaces a file bound on its own (/etc/resolv.conf renewed, ld.so.cache
// rebuilt by rename, as every package install does). The sandbox then
// sees what is below, or the old file, neither of which it could write.
// A mount lost from a writable one (a protected path in the workspace,
// which the host's git replaced) is a change: what it covered is writable.
func onlyDetached(old, now map[string]mountLine) bool {
	if old == nil || now == nil {
		return false
	}
	for id, m := range now {
		o, ok := old[id]
		if !ok {
			return false
		}
		if o.text != m.text && !(deletedOnly(o.text, m.text) && o.readOnly && old[o.parent].readOnly) {
			return false
		}
	}
	for id, o := range old {
		if _, ok := now[id]; ok {
			continue
		}
		parent, ok := old[o.parent]
		if !o.readOnly || !ok || !parent.readOnly {
			return false
		}
	}
	return true
}

// deletedOnly reports whether a mountinfo line changed only by its root
// (the fourth field) gaining the kernel's "//deleted".
func deletedOnly(old, now string) bool {
	o, n := strings.Fields(old), strings.Fields(now)
	if len(o) != len(n) || len(o) < 4 || n[3] != o[3]+"//deleted" {
		return false
	}
	for i := range o {
		if i != 3 && o[i] != n[i] {
			return false
		}
	}
	return true
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Compare names every change from old to now, one phrase each.
func Compare(old, now State) []string {
	var out []string
	for _, ns := range namespaces {
		if old.Namespaces[ns] != now.Namespaces[ns] {
			out = append(out, fmt.Sprintf("init's %s namespace changed (%s, now %s)", ns, old.Namespaces[ns], now.Namespaces[ns]))
		}
	}
	if old.Mounts != now.Mounts && !onlyDetached(old.mountLines, now.mountLines) {
		out = append(out, fmt.Sprintf("the mount table changed (sha256 %.12s, now %.12s)", old.Mounts, now.Mounts))
	}
	for _, f := range slices.Sorted(maps.Keys(old.Limits)) {
		if v, ok := now.Limits[f]; !ok || v != old.Limits[f] {
			out = append(out, fmt.Sprintf("the cgroup limit %s changed (%s, now %s)", f, old.Limits[f], orGone(v, ok)))
		}
	}
	if old.Profile != now.Profile {
		out = append(out, fmt.Sprintf("the profile file changed (sha256 %.12s, now %.12s)", old.Profile, now.Profile))
	}
	if old.Egress != now.Egress {
		out = append(out, fmt.Sprintf("the egress rules in force changed (sha256 %.12s, now %.12s)", old.Egress, now.Egress))
	}
	return out
}

func orGone(v string, ok bool) string {
	if !ok {
		return "gone"
	}
	return v
}

// Unconfined names the processes of the sandbox, init (pid) and those
// below it, that run without a seccomp filter or no_new_privs, or outside
// init's namespaces (ns from Capture). Processes that end while they are
// read are skipped.
func Unconfined(pid int, ns map[string]string) []string {
	var out []string
	for _, p := range append([]int{pid}, Descendants(pid)...) {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil || strings.HasPrefix(field(status, "State"), "Z") {
			continue // gone, or a zombie (whose filter the kernel has freed)
		}
		if v := field(status, "Seccomp"); v != "" && v != "2" {
			out = append(out, fmt.Sprintf("process %d runs without its seccomp filter (mode %s)", p, v))
		}
		if v := field(status, "NoNewPrivs"); v != "" && v != "1" {
			out = append(out, fmt.Sprintf("process %d runs without no_new_privs", p))
		}
		for _, kind := range namespaces {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p, kind))
			if err == nil && l != ns[kind] {
				out = append(out, fmt.Sprintf("process %d is outside the sandbox's %s namespace", p, kind))
			}
		}
	}
	return out
}

// Confined reports whether some process below init runs under a seccomp
// filter: the command has started, confined.
func Confined(pid int) bool {
	for _, p := range Descendants(pid) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p)); err == nil && field(b, "Seccomp") == "2" {
			return true
		}
	}
	return false
}

// Descendants lists the processes below pid, by the kernel's children
// lists.
func Descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 100000 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// field reads a "Name:\tvalue" line of /proc/PID/status.
func field(status []byte, name string) string {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
