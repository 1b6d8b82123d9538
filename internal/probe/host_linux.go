package probe

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// HostBattery is every host-side probe.
func HostBattery() []HostProbe {
	var out []HostProbe
	for _, lp := range limitProbes {
		out = append(out, HostProbe{lp.id, "resources", lp.attempt, lp.expect(), lp.run})
	}
	out = append(out, initProbes...)
	return append(append(out,
		HostProbe{"life-supervisor-killed", "lifecycle", "SIGKILL cordon while the sandbox runs daemons that left their session",
			"every process of the sandbox dies, and the next cordon to start removes its cgroup", probeSupervisorKilled},
		HostProbe{"life-leftovers", "lifecycle", "end a run that started daemons, after using /tmp and /dev/shm",
			"no process, cgroup, mount or temporary file of the run is left", probeLeftovers},
	), append(deputyProbes, deputyNetProbes...)...)
}

// limitProbe pushes against one limit. The profile's value is used when it
// is at most small; otherwise small is, so that the probe is quick. The
// attack is bounded at bound: when nothing stops it, it gets there.
type limitProbe struct {
	id, attempt string
	limit       string
	small       string
	attack      string
	bound       string
	// want is the outcome the limit must end the run with; when empty, the
	// limit shows as errno to the attack instead, and the run goes on.
	want  outcome.Status
	errno string
}

var limitProbes = []limitProbe{
	{id: "res-fork-bomb", attempt: "start processes without end (a fork bomb)", limit: "pids", small: "64", attack: "fork", bound: "128", want: outcome.PidsLimit},
	{id: "res-memory", attempt: "allocate memory without end", limit: "memory", small: "128MiB", attack: "memory", bound: "256MiB", want: outcome.MemoryLimit},
	{id: "res-cpu-time", attempt: "spin on the CPU", limit: "cpu_time", small: "1s", attack: "cpu", bound: "3s", want: outcome.CPUTimeLimit},
	{id: "res-wall", attempt: "never finish", limit: "wall", small: "1s", attack: "sleep", bound: "3s", want: outcome.Timeout},
	{id: "res-file-size", attempt: "write one file without end", limit: "file_size", small: "1MiB", attack: "file", bound: "4MiB", want: outcome.FileSizeLimit},
	{id: "res-output", attempt: "write to stdout without end", limit: "output", small: "64KiB", attack: "output", bound: "128KiB", want: outcome.OutputLimit},
	{id: "res-disk-fill", attempt: "fill /tmp", limit: "tmp_size", small: "8MiB", attack: "tmp", bound: "16MiB", errno: "ENOSPC"},
	{id: "res-open-files", attempt: "open files without end", limit: "open_files", small: "64", attack: "files", bound: "128", errno: "EMFILE"},
}

func (lp limitProbe) expect() string {
	if lp.want != "" {
		return fmt.Sprintf("stopped at the %s limit, reported as %s", lp.limit, lp.want)
	}
	return fmt.Sprintf("%s at the %s limit", lp.errno, lp.limit)
}

// probeWall is the wall limit of every host-side run but res-wall's: a
// safety net, never what a probe relies on.
const probeWall = 30 * time.Second

func (lp limitProbe) run(r Runner, base *profile.Profile) (Status, string) {
	p := base.Clone()
	if q := p.Resources.Wall; lp.limit != "wall" && (q.Unlimited || q.Duration() > probeWall) {
		p.SetLimit("wall", probeWall.String())
	}
	if err := lowerTo(p, lp.limit, lp.small); err != nil {
		return Error, err.Error()
	}
	if lp.limit == "file_size" { // room in /tmp for the file to outgrow its limit
		if err := raiseTo(p, "tmp_size", "8MiB"); err != nil {
			return Error, err.Error()
		}
	}
	in := p.Resources.Get(lp.limit).String()
	bound := lp.bound
	if n, err := profile.ParseSize(bound); err == nil && strings.ContainsAny(bound, "KMG") {
		bound = strconv.FormatInt(n, 10)
	}
	out := &capture{max: 64 << 10}
	o, err := r.Run(p, []string{lp.attack, bound}, out)
	if err != nil {
		return Error, err.Error()
	}
	said := out.line()
	if lp.attack == "output" {
		said = fmt.Sprintf("wrote %d bytes to stdout", out.n)
	}
	if lp.want == "" {
		if o.Status != outcome.OK {
			return Error, fmt.Sprintf("the run ended as %s: %s", o.Status, o.Message)
		}
		if strings.HasSuffix(said, "then "+lp.errno) {
			return Contained, fmt.Sprintf("%s (%s %s)", said, lp.limit, in)
		}
		return Escaped, fmt.Sprintf("%s; nothing stopped it (%s %s)", said, lp.limit, in)
	}
	if lp.limit == "output" && out.n > limitBytes(p, "output") {
		return Escaped, fmt.Sprintf("%d bytes reached cordon's stdout past the output limit %s", out.n, in)
	}
	switch o.Status {
	case lp.want:
		return Contained, fmt.Sprintf("stopped at %s %s: %s, exit %d", lp.limit, in, o.Status, o.ExitCode)
	case outcome.OK:
		if strings.Contains(said, "out of time") {
			return Error, fmt.Sprintf("%s, neither stopped nor at its bound %s: the host is too slow to tell (%s %s)", said, lp.bound, lp.limit, in)
		}
		if strings.Contains(said, "failed") {
			return Error, fmt.Sprintf("%s, yet the run was reported as %s, not %s (%s %s)", said, o.Status, lp.want, lp.limit, in)
		}
		return Escaped, fmt.Sprintf("%s; nothing stopped it (%s %s)", said, lp.limit, in)
	}
	return Error, fmt.Sprintf("the run ended as %s, not %s: %s", o.Status, lp.want, o.Message)
}

// lowerTo sets the limit to value when the profile's is larger; a lifted
// limit stays lifted, and the attack then runs to its bound.
func lowerTo(p *profile.Profile, name, value string) error {
	q := *p.Resources.Get(name)
	if err := p.SetLimit(name, value); err != nil {
		return err
	}
	if v := p.Resources.Get(name); q.Unlimited || (q.N > 0 && q.N < v.N) {
		*v = q
	}
	return nil
}

// raiseTo sets the limit to value when the profile's is smaller.
func raiseTo(p *profile.Profile, name, value string) error {
	q := *p.Resources.Get(name)
	if err := p.SetLimit(name, value); err != nil {
		return err
	}
	if v := p.Resources.Get(name); q.Unlimited || q.N > v.N {
		*v = q
	}
	return nil
}

func limitBytes(p *profile.Profile, name string) int64 {
	q := p.Resources.Get(name)
	if q.Unlimited || q.N == 0 {
		return 1 << 62
	}
	return q.N
}

// capture keeps the first max bytes written to it and counts them all.
type capture struct {
	mu  sync.Mutex
	max int
	n   int64
	buf bytes.Buffer
}

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(b))
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}

// line returns the attack's result line.
func (c *capture) line() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range strings.Split(c.buf.String(), "\n") {
		if s, ok := strings.CutPrefix(l, "attack: "); ok {
			return s
		}
	}
	return "the attack reported nothing"
}

func newMarker() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "cordon-probe-" + hex.EncodeToString(b)
}

// probeSupervisorKilled starts a sandbox under a cordon process of its own,
// waits until the sandbox runs two daemons, kills that cordon with SIGKILL
// (no cleanup of its own can run) and watches what is left.
func probeSupervisorKilled(r Runner, base *profile.Profile) (Status, string) {
	p := base.Clone()
	p.SetLimit("wall", probeWall.String())
	marker := newMarker()
	pr, pw, err := os.Pipe()
	if err != nil {
		return Error, err.Error()
	}
	defer pr.Close()
	// Cgroups that exist already are not this run's, even if a process that
	// had the supervisor's pid before it left them.
	before := set(cgroupsOf(0))
	cmd, err := r.Start(p, []string{"daemon", marker, "--stay"}, pw)
	pw.Close()
	if err != nil {
		return Error, err.Error()
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if sc.Text() == "attack: ready" {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			return Error, "the sandbox ended before its daemons were ready"
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return Error, "the daemons were not ready after 20s"
	}
	supervisor := cmd.Process.Pid
	if n := len(marked(marker)); n < 3 {
		cmd.Process.Kill()
		cmd.Wait()
		return Error, fmt.Sprintf("found %d of the sandbox's 3 marked processes from the host", n)
	}
	start := time.Now()
	cmd.Process.Kill()
	cmd.Wait()
	// The next cordon to start sweeps what the killed one left.
	r.Sweep(p)
	left := waitGone(marker, supervisor, before, 5*time.Second)
	if len(left) > 0 {
		killMarked(marker)
		reclaim(newOnly(cgroupsOf(supervisor), before))
		return Escaped, "left after the supervisor was killed: " + strings.Join(left, ", ")
	}
	return Contained, fmt.Sprintf("the sandbox's processes and cgroups were gone %dms after SIGKILL, the next cordon's sweep included", time.Since(start).Milliseconds())
}

// probeLeftovers runs a sandbox that starts daemons, writes to /tmp and
// /dev/shm, and exits at once; then it looks for anything left of it.
func probeLeftovers(r Runner, base *profile.Profile) (Status, string) {
	p := base.Clone()
	p.SetLimit("wall", probeWall.String())
	marker := newMarker()
	mountsBefore := mountEntries()
	tmpBefore := tempEntries()
	kidsBefore := children()
	cgroupsBefore := set(cgroupsOf(os.Getpid()))
	out := &capture{max: 4096}
	o, err := r.Run(p, []string{"daemon", marker}, out)
	if err != nil {
		return Error, err.Error()
	}
	if out.line() != "ready" {
		return Error, fmt.Sprintf("the attack said %q (%s)", out.line(), o.Status)
	}
	// What the run leaves is gone as soon as cordon has ended it and its
	// helpers have ended and been reaped, which on a loaded host takes
	// seconds: it is waited for (up to leftoverWait), and only what
	// outlasts that is left. A real leftover outlasts any wait.
	left := waitGone(marker, os.Getpid(), cgroupsBefore, leftoverWait)
	for deadline := time.Now().Add(leftoverWait); ; time.Sleep(20 * time.Millisecond) {
		var helpers []string
		for pid, cmdline := range children() {
			if _, ok := kidsBefore[pid]; !ok {
				helpers = append(helpers, fmt.Sprintf("helper process %d (%s)", pid, cmdline))
			}
		}
		if len(helpers) == 0 || time.Now().After(deadline) {
			left = append(left, helpers...)
			break
		}
	}
	for m := range mountEntries() {
		if !mountsBefore[m] && sandboxMount(m) {
			left = append(left, "a mount in the host's table: "+m)
		}
	}
	for e := range tempEntries() {
		// The probes' own directories (cordon-probe-...), of this run or
		// of another probing at the same time, are not the run's, nor is
		// the spool directory a cordon serve makes once, as it starts
		// (cordon-spool-...), another server's on the same host.
		if !tmpBefore[e] && strings.Contains(e, "cordon") && !strings.Contains(e, "cordon-probe-") && !strings.Contains(e, "cordon-spool-") {
			left = append(left, "temporary "+e)
		}
	}
	if len(left) > 0 {
		killMarked(marker)
		reclaim(newOnly(cgroupsOf(os.Getpid()), cgroupsBefore))
		return Escaped, "left after the run: " + strings.Join(left, ", ")
	}
	return Contained, fmt.Sprintf("no process, cgroup, mount or temporary file left (run %s)", o.Status)
}

// leftoverWait bounds how long life-leftovers waits for what a run leaves
// to go; it is no margin the probe depends on: what goes sooner is not
// waited for.
const leftoverWait = 30 * time.Second

// waitGone waits until no process carries marker and no cgroup of the
// cordon process supervisor is left but those in before, and returns what
// is still there.
func waitGone(marker string, supervisor int, before map[string]bool, limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	for {
		var left []string
		for _, pid := range marked(marker) {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
		for _, d := range newOnly(cgroupsOf(supervisor), before) {
			left = append(left, "cgroup "+d)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// marked lists the processes whose arguments include marker.
func marked(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte("\x00"+marker+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// reclaim kills what is in the cgroups dirs and removes them, for the
// cleanup after an escape.
func reclaim(dirs []string) {
	deadline := time.Now().Add(2 * time.Second)
	for cgroup.Reclaim(dirs) != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

func set(list []string) map[string]bool {
	out := map[string]bool{}
	for _, s := range list {
		out[s] = true
	}
	return out
}

// newOnly is list without what is in before.
func newOnly(list []string, before map[string]bool) []string {
	var out []string
	for _, s := range list {
		if !before[s] {
			out = append(out, s)
		}
	}
	return out
}

func killMarked(marker string) {
	for _, pid := range marked(marker) {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// cgroupsOf lists the cgroups the cordon process pid made (cordon-PID-*),
// or any cordon process (pid 0), below the cgroups this process is in.
func cgroupsOf(pid int) []string {
	name := fmt.Sprintf("cordon-%d-*", pid)
	if pid == 0 {
		name = "cordon-*"
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		pattern := filepath.Join("/sys/fs/cgroup/*", parts[2], name)
		if parts[1] == "" {
			pattern = filepath.Join("/sys/fs/cgroup", cgroup.Home(parts[2]), name)
		}
		found, _ := filepath.Glob(pattern)
		for _, f := range found {
			if real, err := filepath.EvalSymlinks(f); err == nil && !seen[real] {
				seen[real] = true
				out = append(out, real)
			}
		}
	}
	return out
}

func mountEntries() map[string]bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - FSTYPE SOURCE ...
		f := strings.Fields(line)
		_, after, ok := strings.Cut(line, " - ")
		if len(f) < 5 || !ok {
			continue
		}
		out[f[4]+" "+strings.Fields(after)[0]] = true
	}
	return out
}

// sandboxMount says whether a mount entry ("MOUNTPOINT FSTYPE") new in
// the host's table could be the sandbox's: where its root is assembled
// (over /tmp) or its scratch file systems go, one of cordon's own
// directories, or a kind of file system only a sandbox's set-up mounts.
// Other programs of the host mount and unmount as they please meanwhile.
func sandboxMount(entry string) bool {
	point, fstype, _ := strings.Cut(entry, " ")
	switch {
	case point == "/tmp" || point == "/dev/shm" || strings.HasPrefix(point, "/tmp/proc") || strings.Contains(point, "cordon"):
		return true
	case fstype == "proc" || fstype == "sysfs" || fstype == "devpts" || fstype == "mqueue":
		return true
	}
	return false
}

// tempEntries lists what is in the host's temporary directories.
func tempEntries() map[string]bool {
	out := map[string]bool{}
	for _, dir := range []string{os.TempDir(), "/dev/shm"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			out[filepath.Join(dir, e.Name())] = true
		}
	}
	return out
}

// children lists this process's children, with their arguments.
func children() map[int]string {
	out := map[int]string{}
	self := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after ')'.
		i := bytes.LastIndexByte(st, ')')
		if f := strings.Fields(string(st[i+1:])); i > 0 && len(f) > 1 && f[1] == self {
			cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			pid, _ := strconv.Atoi(e.Name())
			out[pid] = strings.ReplaceAll(strings.TrimRight(string(cl), "\x00"), "\x00", " ")
		}
	}
	return out
}
