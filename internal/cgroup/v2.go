package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cpuPeriodUS is the CPU bandwidth period, in microseconds, for both versions.
const cpuPeriodUS = 100000

type v2 struct {
	dir string
	c   counters
}

func (h Host) newV2(name string, l Limits) (Group, error) {
	own, err := h.ownPath("")
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(h.Root, filepath.Clean("/"+own))
	if err := prepareV2(parent); err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return nil, fmt.Errorf("%w: %v", ErrNotDelegated, err)
		}
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	g := &v2{dir: dir}
	if err := g.set(l); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// prepareV2 enables the controllers for the children of parent, cordon's
// cgroup. A cgroup other than the root cannot hold processes and enable
// controllers for its children at once: when cordon is the only process of
// its cgroup, it moves into a leaf of its own first.
func prepareV2(parent string) error {
	err := enableControllers(parent)
	if errors.Is(err, syscall.EBUSY) {
		if err = evacuate(parent, os.Getpid()); err == nil {
			err = enableControllers(parent)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotDelegated, err)
	}
	return nil
}

// enableControllers makes the memory, pids and cpu controllers available to
// the children of parent, to limit and to measure.
func enableControllers(parent string) error {
	want := []string{"memory", "pids", "cpu"}
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(b))
	var add []string
	for _, c := range want {
		if !contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := write(parent, "cgroup.subtree_control", strings.Join(add, " ")); err != nil {
		return fmt.Errorf("enabling %s in %s: %w", strings.Join(add, " "), parent, err)
	}
	return nil
}

// SupervisorLeaf is the cgroup, below cordon's own, that cordon moves into
// on cgroup v2 when it is the only process of its cgroup. It is kept for
// later runs.
const SupervisorLeaf = "cordon.supervisor"

// evacuate moves process pid from parent into parent/SupervisorLeaf, if it
// is the only process in parent.
func evacuate(parent string, pid int) error {
	pids, err := procs(parent)
	if err != nil {
		return err
	}
	if len(pids) != 1 || pids[0] != pid {
		return fmt.Errorf("%s holds other processes than cordon (%d); run cordon in a cgroup of its own, or in one whose controllers are enabled for its children", parent, len(pids))
	}
	leaf := filepath.Join(parent, SupervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", leaf, err)
	}
	return write(leaf, "cgroup.procs", strconv.Itoa(pid))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (g *v2) Settings() (map[string]string, error) {
	out := map[string]string{}
	return out, readSettings(out, g.dir, "memory.max", "memory.swap.max", "memory.oom.group", "pids.max", "cpu.max")
}

func (g *v2) set(l Limits) error {
	if l.MemoryBytes > 0 {
		m := strconv.FormatInt(l.MemoryBytes, 10)
		if err := write(g.dir, "memory.max", m); err != nil {
			return err
		}
		// Swap may not bypass the limit.
		if _, err := os.Stat(filepath.Join(g.dir, "memory.swap.max")); err == nil {
			if err := write(g.dir, "memory.swap.max", "0"); err != nil {
				return err
			}
		}
		// An out-of-memory kill takes the whole sandbox, not one process.
		if err := write(g.dir, "memory.oom.group", "1"); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		if err := write(g.dir, "pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if l.CPUMillicores > 0 {
		quota := l.CPUMillicores * cpuPeriodUS / 1000
		if err := write(g.dir, "cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriodUS)); err != nil {
			return err
		}
	}
	return nil
}

func (g *v2) Version() string { return "v2" }
func (g *v2) Paths() []string { return []string{g.dir} }

func (g *v2) Dir() (*os.File, error) {
	return os.OpenFile(g.dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
}

func (g *v2) AddProcess(pid int) error {
	return write(g.dir, "cgroup.procs", strconv.Itoa(pid))
}

func (g *v2) Stats() (Stats, error) {
	var s Stats
	s.MemoryPeak = g.c.optInt(g.dir, "memory.peak")
	s.PidsPeak = g.c.optInt(g.dir, "pids.peak")
	var err error
	if s.PidsMaxEvents, err = g.c.keyed(g.dir, "pids.events", "max"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	if s.OOMKills, err = g.c.keyed(g.dir, "memory.events", "oom_kill"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	for _, k := range [...]struct {
		key string
		dst **int64
	}{{"usage_usec", &s.CPUUsageNS}, {"user_usec", &s.CPUUserNS}, {"system_usec", &s.CPUSystemNS}} {
		key, dst := k.key, k.dst
		if us, err := g.c.keyed(g.dir, "cpu.stat", key); err == nil {
			ns := us * 1000
			*dst = &ns
		}
	}
	return s, nil
}

// StartIn is not needed on v2: clone3 starts a process in the group (Dir).
func (g *v2) StartIn(func() error) (bool, error) { return false, nil }

func (g *v2) Kill() error {
	if err := write(g.dir, "cgroup.kill", "1"); err == nil {
		return nil
	}
	return killAll([]string{g.dir})
}

func (g *v2) Remove() error {
	g.c.close()
	return removeDirs([]string{g.dir})
}

// killAll sends SIGKILL to every process listed in the directories.
func killAll(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		pids, err := procs(d)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, pid := range pids {
			if pid == os.Getpid() {
				continue // never cordon itself, whose thread may pass through
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
