package sandbox

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// Result gathers the facts of one run for outcome.Decide.
type Result struct {
	// ExitCode is the command's exit status; for an exec failure, 126 or
	// 127 as a shell reports them.
	ExitCode int
	// Signal is the signal that killed the command, 0 if none.
	Signal int
	// ExecError says why the command could not be started.
	ExecError   string
	LandlockABI int
	// Degraded lists the layers that were skipped.
	Degraded []string
	Notes    []string

	exited  bool
	tmpUsed int64
	// changes is what became of a reviewed workspace's changes.
	changes *outcome.Changes
	caches  *outcome.Caches  // what the agent's caches held when the run ended
	obeyed  []outcome.Obeyed // what the run made that the host's tools obey
	// obeyedUnchecked says what the look for obeyed did not cover.
	obeyedUnchecked string
	otherSignal     int // a limit's signal that killed an orphan
	limiter         *limiter
	output          *outputCap
	killed          string
	killedEvidence  string // how cordon knows the limit in killed was reached, when it says
	stats           cgroup.Stats
	wall            time.Duration
	timeout         time.Duration // the command's own, when shorter than wall
	rusage          *unix.Rusage

	proxy           *egress.Proxy
	egress          []egress.Event
	egressExhausted string
	egressBudget    string

	mu    sync.Mutex
	intr  bool
	drift []string
}

func (r *Result) drifted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drift != nil
}

func (r *Result) driftChanges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drift
}

func (r *Result) setDrift(changes []string) {
	r.mu.Lock()
	if r.drift == nil {
		r.drift = changes
	}
	r.mu.Unlock()
}

func (r *Result) setInterrupted() {
	r.mu.Lock()
	r.intr = true
	r.mu.Unlock()
}

func (r *Result) interrupted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.intr
}

// facts turns what the run observed into outcome.Facts.
func (r *Result) facts(err error) outcome.Facts {
	f := outcome.Facts{
		Err:          err,
		Exited:       r.exited,
		Code:         r.ExitCode,
		Signal:       r.Signal,
		ExecFailed:   r.ExecError,
		Killed:       r.killed,
		KilledBy:     r.killedEvidence,
		OOMKills:     r.stats.OOMKills,
		Wall:         r.wall,
		Degraded:     r.Degraded,
		Egress:       r.egress,
		EgressUsedUp: r.egressExhausted,
		EgressBudget: r.egressBudget,
		OtherSignal:  r.otherSignal,
	}
	if f.Killed == deniedLimit {
		// Not a resource limit: the proxy's budget, in EgressUsedUp.
		f.Killed = ""
	}
	r.mu.Lock()
	f.Drift = r.drift
	r.mu.Unlock()
	if r.Signal != 0 {
		f.SignalName = unix.SignalName(unix.Signal(r.Signal))
	}
	if r.output != nil {
		f.Usage.StdoutBytes, f.Usage.StderrBytes = r.output.counts()
		f.OutputSaid = r.output.saidLimits()
		f.Protected = r.output.protectedSaid()
	}
	// The cgroup counts every process, also those killed with init; the
	// rusage of init only those it reaped.
	if r.stats.CPUUserNS != nil && r.stats.CPUSystemNS != nil {
		user, sys := *r.stats.CPUUserNS/1e6, *r.stats.CPUSystemNS/1e6
		f.Usage.UserCPUMS, f.Usage.SystemCPUMS = &user, &sys
	} else if ru := r.rusage; ru != nil {
		user := ru.Utime.Sec*1000 + ru.Utime.Usec/1000
		sys := ru.Stime.Sec*1000 + ru.Stime.Usec/1000
		f.Usage.UserCPUMS, f.Usage.SystemCPUMS = &user, &sys
	}
	f.Usage.PeakMemoryBytes = r.stats.MemoryPeak
	f.Usage.PeakProcesses = r.stats.PidsPeak
	f.Usage.WallMS = r.wall.Milliseconds()
	if r.limiter != nil && err == nil {
		f.Limits = r.limiter.states(f.Usage, r.tmpUsed)
		if r.timeout > 0 {
			f.Limits = append(f.Limits, timeoutState(r.timeout, f.Usage.WallMS))
		}
	}
	return f
}
