package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/journal"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// watchEvery is how often the cgroup's counters are read; idleWatchEvery
// how often while a kept-alive sandbox runs no command.
const (
	watchEvery     = 20 * time.Millisecond
	idleWatchEvery = time.Second
)

// limiter enforces the limits that live on the host side: the sandbox's
// cgroup, the wall clock, the output cap (with outputCap), and a watcher
// that ends the run when the cgroup reports a limit hit.
type limiter struct {
	res   profile.Resources
	group cgroup.Group // nil without cgroups
	// caches, when the sandbox has its agent's caches, bounds them.
	caches *cacheWatch
	// perCommand: the wall limit is each command's (a Box), not the
	// sandbox's.
	perCommand bool
	// hostRoot: the sandbox user is host root (--allow-degraded=idmap),
	// whom RLIMIT_NPROC does not bind.
	hostRoot bool
	// nproc is RLIMIT_NPROC's value where it bounds the sandbox's tasks in
	// place of a cgroup; cordon then counts them (see taskCounter).
	nproc int64
	// idle, when set, says no command runs: the counters are then read
	// every idleWatchEvery only (what a command left running is still
	// watched, only less often; the kernel enforces the limits meanwhile),
	// until a command's start sends on busy.
	idle func() bool
	busy chan struct{}
	// journal, when set, holds under jid what the sandbox made on the
	// host (its cgroups, its placeholders), for a later cordon to remove
	// if this one dies first (see package journal).
	journal *journal.Journal
	jid     string
	// release removes the protected paths' placeholders, once the
	// sandbox is gone; released makes it happen once. groupGone says the
	// cgroup was removed (or there was none): the journal is then told
	// the sandbox left nothing.
	release   func()
	released  sync.Once
	groupGone bool

	// review: the workspace is reviewed, and layer is how much of its
	// layer the run used, once known.
	review bool
	layer  *layerUse
	// diskLayer: the layer is on disk, bounded by cordon's watch of it.
	diskLayer bool

	mu     sync.Mutex
	killed string // the limit that ended the run
	// peakTasks is the most tasks watchTasks counted (no cgroup).
	peakTasks int64
	// evidence says how cordon knows the limit was reached, where a count
	// of its own, not the kernel's report, tripped it.
	evidence string
	kill     func() // kills the whole sandbox
	stop     chan struct{}
	wg       sync.WaitGroup
	start    time.Time
}

// needsCgroup reports whether any limit only a cgroup can enforce is set.
func needsCgroup(r profile.Resources) bool {
	return r.Memory.Set() || r.Pids.Set() || r.CPUs.Set() || r.CPUTime.Set()
}

// newLimiter creates the sandbox's cgroup when a limit needs one, and fills
// the spec's rlimits. Without a delegated cgroup it refuses, unless the user
// allowed running with the limits that then fall back or go unenforced.
func newLimiter(p *profile.Profile, allow map[string]bool, spec *Spec, res *Result) (*limiter, error) {
	r := p.Resources
	l := &limiter{res: r, stop: make(chan struct{}), busy: make(chan struct{}, 1), review: spec.Layer != nil, diskLayer: spec.Layer != nil && spec.Layer.Dir != "",
		journal: spec.journal, jid: spec.jid}
	spec.Rlimits = Rlimits{
		CPUSeconds: ceilSeconds(r.CPUTime),
		FileSize:   quantity(r.FileSize),
		OpenFiles:  quantity(r.OpenFiles),
	}
	if !needsCgroup(r) {
		return l, nil
	}
	host, err := cgroup.System()
	name := fmt.Sprintf("cordon-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	var dirs []string
	if err == nil {
		// On v2, cordon may have to be alone in its cgroup to move out of
		// it.
		err = host.Prepare()
	}
	if err == nil {
		dirs, err = host.Plan(name)
	}
	if err == nil {
		// The journal names the cgroup before it exists: whenever cordon
		// dies, the next one removes it.
		if err := l.record(func(j *journal.Journal) error { return j.Cgroups(l.jid, dirs) }); err != nil {
			return nil, setupErr("cgroup", err)
		}
		l.group, err = host.New(name, cgroup.Limits{
			MemoryBytes:   quantity(r.Memory),
			Pids:          quantity(r.Pids),
			CPUMillicores: quantity(r.CPUs),
		})
		dieAt("cgroup")
	}
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, cgroup.ErrNotDelegated) {
		return nil, setupErr("cgroup", err)
	}
	if !allow[LayerCgroup] {
		return nil, setupErr("cgroup", fmt.Errorf("%w; refusing to run with memory, cpus, pids and cpu_time not enforced for the whole sandbox (--allow-degraded=cgroup runs with memory and cpus unenforced, and pids and cpu_time limited per process)", err))
	}
	// The best the kernel offers each process instead: RLIMIT_NPROC for
	// processes, RLIMIT_DATA (heap and private writable mappings, not
	// reserved address space) for memory.
	spec.Rlimits.Processes = quantity(r.Pids)
	l.nproc = spec.Rlimits.Processes
	spec.Rlimits.Data = quantity(r.Memory)
	res.Degraded = append(res.Degraded, LayerCgroup)
	return l, nil
}

func quantity(q profile.Quantity) int64 {
	if !q.Set() {
		return 0
	}
	return q.N
}

func ceilSeconds(q profile.Quantity) int64 {
	if !q.Set() {
		return 0
	}
	return int64((q.Duration() + time.Second - 1) / time.Second)
}

// spawn runs start, which forks init with sys, so that init begins its
// life in the sandbox's cgroup where the version allows it: on v2 clone3
// starts it there (CLONE_INTO_CGROUP), on v1 it is forked from a thread
// of cordon that passes through the cgroup. It reports whether init was
// started in place; if not, begin moves it.
func (l *limiter) spawn(sys *syscall.SysProcAttr, start func() error) (bool, error) {
	if l.group == nil {
		return false, start()
	}
	dir, err := l.group.Dir()
	if err != nil {
		return false, setupErr("cgroup", err)
	}
	if dir != nil {
		defer dir.Close()
		sys.UseCgroupFD, sys.CgroupFD = true, int(dir.Fd())
		return true, start()
	}
	if ran, err := l.group.StartIn(start); ran || err != nil {
		return ran, err
	}
	return false, start()
}

// begin places init in the cgroup, unless it started there, and starts the
// wall clock and the watcher.
func (l *limiter) begin(initPid int, placed bool, kill func()) error {
	l.kill = kill
	l.start = time.Now()
	if l.group != nil && !placed {
		if err := l.group.AddProcess(initPid); err != nil {
			return setupErr("cgroup", err)
		}
	}
	if l.res.Wall.Set() && !l.perCommand {
		timer := time.AfterFunc(l.res.Wall.Duration(), func() { l.trip("wall") })
		go func() { <-l.stop; timer.Stop() }()
	}
	if l.group != nil {
		l.wg.Add(1)
		go l.watch()
	}
	// Host root is not bound by RLIMIT_NPROC: its pids are unenforced, and
	// said so.
	if l.group == nil && l.nproc > 0 && !l.hostRoot && !weakened("task-count") {
		if tc, err := newTaskCounter(initPid); err == nil {
			l.wg.Add(1)
			go l.watchTasks(tc, l.nproc)
		}
	}
	return nil
}

// watch ends the run when the cgroup reports that a limit was hit: a fork
// refused by the pids limit, a process killed for memory (cgroup v1 kills
// one process; the whole sandbox goes), or the sandbox's CPU time used up.
func (l *limiter) watch() {
	defer l.wg.Done()
	t := time.NewTimer(watchEvery)
	defer t.Stop()
	for {
		next, ok := l.wake(t)
		if !ok {
			return
		}
		t.Reset(next)
		s, err := l.group.Stats()
		if err != nil {
			continue
		}
		switch {
		case s.OOMKills > 0:
			l.trip("memory")
		case s.PidsMaxEvents > 0:
			l.trip("pids")
		case l.res.CPUTime.Set() && s.CPUUsageNS != nil && *s.CPUUsageNS >= l.res.CPUTime.N:
			l.trip("cpu_time")
		}
	}
}

// wake waits for a watcher's next turn: its timer t, or a command's
// start. It returns the pace to keep from then (watchEvery, or
// idleWatchEvery while a kept-alive sandbox runs no command), and false
// once the limiter stops.
func (l *limiter) wake(t *time.Timer) (time.Duration, bool) {
	select {
	case <-l.stop:
		return 0, false
	case <-l.busy:
	case <-t.C:
	}
	if l.idle != nil && l.idle() {
		return idleWatchEvery, true
	}
	return watchEvery, true
}

// trip ends the run for a limit; the first limit wins.
func (l *limiter) trip(limit string) { l.tripWith(limit, "") }

// tripWith ends the run for a limit, saying how cordon knows it was
// reached; the first limit wins.
func (l *limiter) tripWith(limit, evidence string) {
	l.mu.Lock()
	first := l.killed == ""
	if first {
		l.killed, l.evidence = limit, evidence
	}
	l.mu.Unlock()
	if first {
		l.killAll()
	}
}

// started tells the watcher a command started: back to watchEvery.
func (l *limiter) started() {
	select {
	case l.busy <- struct{}{}:
	default:
	}
}

// tripped returns the limit that ended the sandbox, "" if none did.
func (l *limiter) tripped() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.killed
}

// trippedWith returns the limit that ended the sandbox and how cordon
// knows it was reached.
func (l *limiter) trippedWith() (limit, evidence string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.killed, l.evidence
}

// killAll kills the whole sandbox: init, and whatever is in its cgroup.
func (l *limiter) killAll() {
	if l.kill == nil {
		return
	}
	l.kill()
	if l.group != nil {
		l.group.Kill()
	}
}

// end stops the clocks and returns the limit that ended the run and the
// cgroup's final counters, then removes the cgroup.
func (l *limiter) end() (killed string, stats cgroup.Stats, wall time.Duration) {
	defer l.unprotect()
	close(l.stop)
	l.wg.Wait()
	wall = time.Since(l.start)
	l.mu.Lock()
	killed = l.killed
	l.mu.Unlock()
	if l.group == nil && l.peakTasks > 0 {
		// Counted every so often, not kept by the kernel: at least this.
		peak := l.peakTasks
		stats.PidsPeak = &peak
	}
	if l.group != nil {
		stats, _ = l.group.Stats()
		// A fork refused by the pids limit just before the command ended
		// is caught here if the watcher had no turn.
		if killed == "" && stats.PidsMaxEvents > 0 {
			killed = "pids"
		}
		l.remove()
	}
	return killed, stats, wall
}

// remove deletes the cgroup, killing what may linger, then the
// placeholders. A cgroup that outlasts the wait is left to the journal's
// next sweep, and reclaimed meanwhile by this process while it lives.
func (l *limiter) remove() {
	defer l.unprotect()
	if weakened("cgroup-cleanup") {
		return // test builds only
	}
	deadline := time.Now().Add(5 * time.Second)
	removed := false
	for {
		l.group.Kill()
		if removed = l.group.Remove() == nil; removed || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.groupGone = removed
	dieAt("cgroup-removed")
	if !removed {
		go l.reclaim()
	}
}

// reclaim keeps at a cgroup that would not go, for as long as a sweep
// waits, and tells the journal once it has.
func (l *limiter) reclaim() {
	deadline := time.Now().Add(30 * time.Second)
	for l.group.Remove() != nil {
		if time.Now().After(deadline) {
			return
		}
		l.group.Kill()
		time.Sleep(10 * time.Millisecond)
	}
	l.record(func(j *journal.Journal) error { j.Done(l.jid); return nil })
}

// record writes to the sandbox's journal, if it has one.
func (l *limiter) record(write func(*journal.Journal) error) error {
	if l.journal == nil {
		return nil
	}
	return write(l.journal)
}

// enforcedBy says how each limit was enforced on this run.
func (l *limiter) enforcedBy(name string) string {
	cg := "unenforced"
	if l.group != nil {
		cg = "cgroup " + l.group.Version()
	}
	switch name {
	case "wall", "output":
		return "supervisor"
	case "workspace_size", "workspace_inodes":
		if l.diskLayer {
			return "supervisor"
		}
		return "tmpfs"
	case "cache_size":
		return "supervisor"
	case "tmp_size":
		return "tmpfs"
	case "open_files", "file_size":
		return "rlimit"
	case "memory":
		if l.group == nil {
			return outcome.PrivateMemoryRlimit
		}
		return cg
	case "cpus":
		return cg
	case "pids":
		if l.group == nil && l.hostRoot {
			return "unenforced"
		}
		if l.group == nil {
			return "rlimit"
		}
		return cg
	case "cpu_time":
		if l.group == nil {
			return "rlimit"
		}
		return cg + " and rlimit"
	}
	return "unenforced"
}

// states lists every limit with how it was enforced and how much was used.
func (l *limiter) states(u outcome.Usage, tmpUsed int64) []outcome.LimitState {
	var out []outcome.LimitState
	for _, spec := range profile.Limits {
		if !l.review && (spec.Name == "workspace_size" || spec.Name == "workspace_inodes") {
			continue // no layer to bound
		}
		if l.caches == nil && spec.Name == "cache_size" {
			continue // no caches to bound
		}
		q := l.res.Get(spec.Name)
		st := outcome.LimitState{Name: spec.Name, Value: q.String(), EnforcedBy: l.enforcedBy(spec.Name)}
		if !q.Set() {
			st.EnforcedBy = "unlimited"
		}
		var used float64 = -1
		switch spec.Name {
		case "wall":
			used = float64(u.WallMS) / float64(q.Duration().Milliseconds())
		case "cpu_time":
			if u.UserCPUMS != nil && u.SystemCPUMS != nil {
				used = float64(*u.UserCPUMS+*u.SystemCPUMS) / float64(q.Duration().Milliseconds())
			}
		case "memory":
			if u.PeakMemoryBytes != nil {
				used = float64(*u.PeakMemoryBytes) / float64(q.N)
			}
		case "pids":
			if u.PeakProcesses != nil {
				used = float64(*u.PeakProcesses) / float64(q.N)
			}
		case "tmp_size":
			used = float64(tmpUsed) / float64(q.N)
		case "workspace_size":
			if l.layer != nil {
				used = float64(l.layer.bytes) / float64(q.N)
			}
		case "workspace_inodes":
			if l.layer != nil {
				used = float64(l.layer.inodes) / float64(q.N)
			}
		case "output":
			used = float64(u.StdoutBytes+u.StderrBytes) / float64(q.N)
		case "cache_size":
			used = l.caches.used()
		}
		if used >= 0 && q.Set() {
			v := float64(int(used*1000+0.5)) / 1000
			st.Used = &v
		}
		out = append(out, st)
	}
	return out
}

// unprotect removes the placeholders of the protected paths (see package
// protect) once nothing of the sandbox is left; with the cgroup gone too,
// the journal is told the sandbox left nothing.
func (l *limiter) unprotect() {
	l.released.Do(func() {
		if l.release != nil {
			l.release()
		}
		if l.group == nil || l.groupGone {
			l.record(func(j *journal.Journal) error { j.Done(l.jid); return nil })
		}
	})
}
