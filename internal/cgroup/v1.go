package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// v1 is one directory per controller hierarchy.
type v1 struct {
	dirs map[string]string // controller -> directory
	c    counters
	// memsw reports whether swap is accounted (memory.memsw.*).
	memsw bool
}

func (h Host) newV1(name string, l Limits) (Group, error) {
	g := &v1{dirs: map[string]string{}}
	// Every controller present is used, to measure even what is not limited;
	// one that a limit needs must be present.
	need := map[string]bool{"memory": l.MemoryBytes > 0, "pids": l.Pids > 0, "cpu": l.CPUMillicores > 0}
	for _, c := range v1Controllers {
		dir, err := h.v1Dir(c, name)
		if errors.Is(err, errNotMounted) && !need[c] {
			continue
		}
		if err != nil {
			g.Remove()
			return nil, err
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.Remove()
			if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
				return nil, fmt.Errorf("%w: %v", ErrNotDelegated, err)
			}
			if errors.Is(err, os.ErrNotExist) {
				// A container without a cgroup namespace: its hierarchy
				// shows only its own cgroup, at the root, not the path
				// /proc/self/cgroup names.
				return nil, fmt.Errorf("%w: cordon's own cgroup is not visible where /proc/self/cgroup places it (%v)", ErrNotDelegated, err)
			}
			return nil, fmt.Errorf("creating cgroup: %w", err)
		}
		g.dirs[c] = dir
	}
	if err := g.set(l); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// errNotMounted means a v1 controller's hierarchy is not mounted.
var errNotMounted = errors.New("controller not mounted")

// v1Dir is the directory of the group name in controller's hierarchy.
func (h Host) v1Dir(controller, name string) (string, error) {
	mount := filepath.Join(h.Root, controller)
	if _, err := os.Stat(filepath.Join(mount, "cgroup.procs")); err != nil {
		return "", fmt.Errorf("%w: the %s controller is not mounted (%w)", ErrNotDelegated, controller, errNotMounted)
	}
	own, err := h.ownPath(controller)
	if err != nil {
		return "", err
	}
	return filepath.Join(mount, filepath.Clean("/"+own), name), nil
}

func (g *v1) set(l Limits) error {
	if d, ok := g.dirs["memory"]; ok && l.MemoryBytes > 0 {
		m := strconv.FormatInt(l.MemoryBytes, 10)
		if err := write(d, "memory.limit_in_bytes", m); err != nil {
			return err
		}
		// Swap may not bypass the limit: memory and swap together are held
		// to the same value.
		if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
			if err := write(d, "memory.memsw.limit_in_bytes", m); err != nil {
				return err
			}
			g.memsw = true
		}
	}
	if d, ok := g.dirs["pids"]; ok && l.Pids > 0 {
		if err := write(d, "pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if d, ok := g.dirs["cpu"]; ok && l.CPUMillicores > 0 {
		if err := write(d, "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUS)); err != nil {
			return err
		}
		if err := write(d, "cpu.cfs_quota_us", strconv.FormatInt(l.CPUMillicores*cpuPeriodUS/1000, 10)); err != nil {
			return err
		}
	}
	return nil
}

func (g *v1) Version() string { return "v1" }

func (g *v1) Settings() (map[string]string, error) {
	out := map[string]string{}
	for c, files := range map[string][]string{
		"memory": {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"},
		"pids":   {"pids.max"},
		"cpu":    {"cpu.cfs_quota_us", "cpu.cfs_period_us"},
	} {
		if d, ok := g.dirs[c]; ok {
			if err := readSettings(out, d, files...); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (g *v1) Paths() []string {
	var out []string
	for _, c := range v1Controllers {
		if d, ok := g.dirs[c]; ok {
			out = append(out, d)
		}
	}
	return out
}

func (g *v1) Dir() (*os.File, error) { return nil, nil }

func (g *v1) AddProcess(pid int) error {
	for _, d := range g.Paths() {
		if err := write(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (g *v1) Stats() (Stats, error) {
	var s Stats
	if d, ok := g.dirs["memory"]; ok {
		peak := "memory.max_usage_in_bytes"
		if g.memsw {
			peak = "memory.memsw.max_usage_in_bytes"
		}
		s.MemoryPeak = g.c.optInt(d, peak)
		var err error
		if s.OOMKills, err = g.c.keyed(d, "memory.oom_control", "oom_kill"); err != nil {
			return s, err
		}
	}
	if d, ok := g.dirs["pids"]; ok {
		s.PidsPeak = g.c.optInt(d, "pids.peak")
		var err error
		if s.PidsMaxEvents, err = g.c.keyed(d, "pids.events", "max"); err != nil {
			return s, err
		}
	}
	if d, ok := g.dirs["cpuacct"]; ok {
		s.CPUUsageNS = g.c.optInt(d, "cpuacct.usage")
		s.CPUUserNS = g.c.optInt(d, "cpuacct.usage_user")
		s.CPUSystemNS = g.c.optInt(d, "cpuacct.usage_sys")
	}
	return s, nil
}

func (g *v1) Kill() error { return killAll(g.Paths()) }

func (g *v1) Remove() error {
	g.c.close()
	return removeDirs(g.Paths())
}
