// Package cgroup gives one sandbox a cgroup of its own, below cordon's own
// cgroup and never elsewhere: it sets the memory (swap included), process
// and CPU limits, reads usage, kills what is inside, and removes it. It
// speaks cgroup v2 (a delegated subtree or the root) and cgroup v1 (the
// memory, pids, cpu and cpuacct controllers), chosen at run time. All paths
// are relative to a root directory, so the package is tested against fake
// trees as well as the real one.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Limits are what the cgroup enforces; zero means no limit.
type Limits struct {
	MemoryBytes   int64
	Pids          int64
	CPUMillicores int64
}

// Stats is what the cgroup measured. Nil fields were not available.
type Stats struct {
	MemoryPeak *int64
	PidsPeak   *int64
	// PidsMaxEvents counts forks refused by the pids limit.
	PidsMaxEvents int64
	// OOMKills counts processes killed for the memory limit.
	OOMKills int64
	// CPUUsageNS is the CPU time of everything in the cgroup, and
	// CPUUserNS and CPUSystemNS its parts, when known.
	CPUUsageNS  *int64
	CPUUserNS   *int64
	CPUSystemNS *int64
}

// Group is one sandbox's cgroup.
type Group interface {
	// Version is "v2" or "v1".
	Version() string
	// AddProcess moves a process (all its threads) into the group.
	AddProcess(pid int) error
	// Dir opens the group's directory for clone3's CLONE_INTO_CGROUP,
	// which starts a process in the group without moving it there; nil
	// when the version has no such thing (v1).
	Dir() (*os.File, error)
	// StartIn runs start so that the process it forks begins its life in
	// the group, where the version allows it without Dir and without
	// moving a process (v1); it reports whether it ran start.
	StartIn(start func() error) (bool, error)
	Stats() (Stats, error)
	// Kill kills every process in the group.
	Kill() error
	// Remove deletes the group's directories; it must be empty.
	Remove() error
	// Paths are the group's directories, for messages and cleanup.
	Paths() []string
	// Settings reads back the files that hold the group's limits, by name
	// ("memory.limit_in_bytes", "cpu.max"), to see whether anything
	// changed them.
	Settings() (map[string]string, error)
}

// readSettings reads the named files of dir that exist.
func readSettings(out map[string]string, dir string, files ...string) error {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		out[f] = strings.TrimSpace(string(b))
	}
	return nil
}

// ErrNotDelegated means cordon may not create cgroups where it runs.
var ErrNotDelegated = errors.New("no cgroup is delegated to cordon here")

// Host describes where cgroups are on this host.
type Host struct {
	// Root is the cgroup file system's mount point, /sys/fs/cgroup.
	Root string
	// Self is the content of /proc/self/cgroup.
	Self []byte
}

// System is the real host.
func System() (Host, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return Host{}, fmt.Errorf("reading own cgroup: %w", err)
	}
	return Host{Root: "/sys/fs/cgroup", Self: self}, nil
}

// v1Controllers are the v1 hierarchies cordon uses: cpuacct only measures.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// Version reports "v2" when the root is a cgroup2 tree with controllers,
// "v1" when v1 controllers are mounted below it, "" when neither.
func (h Host) Version() string {
	if _, err := os.Stat(filepath.Join(h.Root, "cgroup.controllers")); err == nil {
		return "v2"
	}
	for _, c := range v1Controllers[:3] {
		if _, err := os.Stat(filepath.Join(h.Root, c, "cgroup.procs")); err == nil {
			return "v1"
		}
	}
	return ""
}

// New creates the group name below cordon's own cgroup and sets the limits.
// On failure nothing is left behind.
func (h Host) New(name string, l Limits) (Group, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	switch h.Version() {
	case "v2":
		return h.newV2(name, l)
	case "v1":
		return h.newV1(name, l)
	}
	return nil, fmt.Errorf("%w: no cgroup file system at %s", ErrNotDelegated, h.Root)
}

// Plan returns the directories New(name) creates, in the order of Paths,
// before it creates them: a helper that is to remove them if cordon dies
// must know them before they exist.
func (h Host) Plan(name string) ([]string, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	switch h.Version() {
	case "v2":
		own, err := h.ownPath("")
		if err != nil {
			return nil, err
		}
		return []string{filepath.Join(h.Root, filepath.Clean("/"+own), name)}, nil
	case "v1":
		var dirs []string
		for _, c := range v1Controllers {
			dir, err := h.v1Dir(c, name)
			if errors.Is(err, errNotMounted) {
				continue
			}
			if err != nil {
				return nil, err
			}
			dirs = append(dirs, dir)
		}
		return dirs, nil
	}
	return nil, fmt.Errorf("%w: no cgroup file system at %s", ErrNotDelegated, h.Root)
}

// Home returns cordon's own cgroup given the v2 path of a process's cgroup
// (from /proc/PID/cgroup): the path itself, or, for cordon's supervisor leaf
// (SupervisorLeaf), the cgroup cordon moved out of, below which its
// sandboxes' cgroups are.
func Home(path string) string {
	if dir, leaf := filepath.Split(path); leaf == SupervisorLeaf {
		return filepath.Clean(dir)
	}
	return path
}

// Prepare makes the host ready for New, before anything that New's groups
// must not count is started: on v2, cordon's
// cgroup must enable the controllers for its children, and cordon moves into
// its supervisor leaf first when it is alone in its cgroup (see New). A
// helper started after Prepare starts in that leaf with cordon. Prepare
// does nothing on v1.
func (h Host) Prepare() error {
	if h.Version() != "v2" {
		return nil
	}
	own, err := h.ownPath("")
	if err != nil {
		return err
	}
	return prepareV2(filepath.Join(h.Root, filepath.Clean("/"+own)))
}

func checkName(name string) error {
	if strings.ContainsAny(name, "/") || name == "" || name == "." || name == ".." {
		return fmt.Errorf("bad cgroup name %q", name)
	}
	return nil
}

// ownPath returns the path of the process's cgroup in the hierarchy whose
// /proc/self/cgroup entry lists controller ("" for the v2 entry). On v2,
// that of a cordon that moved into its supervisor leaf is the cgroup it
// moved out of (see Home).
func (h Host) ownPath(controller string) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(h.Self))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return Home(parts[2]), nil
		}
		for _, c := range strings.Split(parts[1], ",") {
			if controller != "" && c == controller {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("no %q entry in /proc/self/cgroup", controller)
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s: %w", file, err)
	}
	return nil
}

func parseInt(b []byte) (int64, error) {
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return -1, nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// counters reads a cgroup's counter files through descriptors opened once:
// the watcher reads them every few milliseconds, and opening one walks the
// cgroup file system under a lock that every cgroup operation on the host
// takes too (with many sandboxes, the walks alone made them queue).
type counters struct {
	mu    sync.Mutex
	files map[counterFile]*os.File
	buf   [4096]byte // what read reads into, under mu
}

// counterFile names a counter file by its directory and name, so that
// finding its descriptor joins no path.
type counterFile struct{ dir, name string }

// read passes the current content of dir/file to parse, under c.mu: the
// file is read every few milliseconds, into the same buffer, which parse
// must not keep.
func (c *counters) read(dir, file string, parse func([]byte) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := counterFile{dir, file}
	f, ok := c.files[k]
	if !ok {
		var err error
		if f, err = os.Open(filepath.Join(dir, file)); err != nil {
			return err
		}
		if c.files == nil {
			c.files = map[counterFile]*os.File{}
		}
		c.files[k] = f
	}
	n, err := f.ReadAt(c.buf[:], 0)
	if err != nil && err != io.EOF {
		return err
	}
	return parse(c.buf[:n])
}

// optInt reads a counter that older kernels lack.
func (c *counters) optInt(dir, file string) *int64 {
	var v int64
	if c.read(dir, file, func(b []byte) (err error) {
		v, err = parseInt(b)
		return err
	}) != nil {
		return nil
	}
	return &v
}

// keyed reads "key value" lines (memory.events, pids.events, cpu.stat,
// memory.oom_control).
func (c *counters) keyed(dir, file, key string) (int64, error) {
	var v int64
	err := c.read(dir, file, func(b []byte) (err error) {
		for len(b) > 0 {
			var line []byte
			line, b, _ = bytes.Cut(b, []byte("\n"))
			// Two fields, apart by blanks; other lines are not counters.
			line = bytes.TrimSpace(line)
			i := bytes.IndexAny(line, " \t")
			if i < 0 || string(line[:i]) != key {
				continue
			}
			val := bytes.TrimSpace(line[i:])
			if len(val) == 0 || bytes.ContainsAny(val, " \t") {
				continue
			}
			v, err = parseInt(val)
			return err
		}
		return nil
	})
	return v, err
}

// close closes the descriptors, before the cgroup goes.
func (c *counters) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
}

// procs lists the pids in a cgroup directory.
func procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// removeDirs removes cgroup directories, deepest first.
func removeDirs(dirs []string) error {
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reclaim kills every process in the cgroup directories and removes them;
// it fails while any is left. It is how a later cordon removes the
// cgroups of a sandbox whose cordon was killed (see package journal).
func Reclaim(dirs []string) error {
	killAll(dirs)
	return removeDirs(dirs)
}
