package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/drift"
	"github.com/cordon-sandbox/cordon/internal/idlemem"
)

// drifter checks a running sandbox against the state it had once its
// command ran confined (setup over): its namespaces, mount table, cgroup
// limits, egress rules and profile file, and the confinement of each of its
// processes. A change stops the sandbox with the drift outcome, or, with
// drift.action warn, is reported and becomes the new baseline.
type drifter struct {
	opts    Options
	lim     *limiter
	initPid int
	res     *Result
	log     io.Writer
	src     drift.Sources
	// checked runs after each periodic check, when set.
	checked func()

	mu   sync.Mutex
	base *drift.State // nil until captured
	done bool         // stopped the sandbox, or init is gone
}

func newDrifter(opts Options, lim *limiter, initPid int, res *Result, log io.Writer) *drifter {
	d := &drifter{opts: opts, lim: lim, initPid: initPid, res: res, log: log,
		src: drift.Sources{ProfileFile: opts.ProfileFile}}
	if lim.group != nil {
		d.src.Limits = lim.group.Settings
	}
	if px := res.proxy; px != nil {
		d.src.Egress = func() []byte {
			b, _ := json.Marshal(px.Policy)
			return b
		}
	}
	return d
}

// baseline records the state to compare with.
func (d *drifter) baseline() error {
	s, err := drift.Capture(d.initPid, d.src)
	if err != nil {
		return err
	}
	if sum := d.opts.Profile.FileDigest(); sum != "" && d.src.ProfileFile != "" {
		// The profile as it was read to build the sandbox, not as it is
		// by now.
		s.Profile = sum
	}
	d.mu.Lock()
	d.base = &s
	d.mu.Unlock()
	return nil
}

// check compares the sandbox with its baseline now, and acts on what
// changed, which it returns.
func (d *drifter) check() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.base == nil || d.done {
		return nil
	}
	now, err := drift.Capture(d.initPid, d.src)
	if err != nil {
		d.done = true // init has ended
		return nil
	}
	changes := drift.Compare(*d.base, now)
	if !anyWeakened() {
		changes = append(changes, drift.Unconfined(d.initPid, d.base.Namespaces)...)
	}
	if len(changes) == 0 {
		return nil
	}
	if !d.opts.Profile.DriftStops() {
		fmt.Fprintf(d.log, "cordon: drift: %s\n", strings.Join(changes, "; "))
		d.base = &now
		return changes
	}
	fmt.Fprintf(d.log, "cordon: drift: %s; the sandbox is stopped\n", strings.Join(changes, "; "))
	d.res.setDrift(changes)
	d.lim.killAll()
	d.done = true
	return changes
}

// watch checks every drift.every until done is closed. With confined
// false it first waits (up to a minute) for the command to run confined;
// a kept-alive sandbox's init is confined before it is ready.
func (d *drifter) watch(confined bool, done <-chan struct{}) {
	every := d.opts.Profile.DriftEvery()
	if !confined {
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		for deadline := time.Now().Add(time.Minute); !drift.Confined(d.initPid); {
			select {
			case <-done:
				return
			case <-poll.C:
			}
			if time.Now().After(deadline) {
				return
			}
		}
	}
	if d.baseline() != nil {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		d.check()
		if d.checked != nil {
			d.checked()
		}
	}
}

// watchDrift starts checking a run every drift.every, when the profile
// asks for drift checks.
func watchDrift(opts Options, lim *limiter, initPid int, res *Result, stderr io.Writer, done <-chan struct{}) {
	if opts.Profile.DriftEvery() == 0 {
		return
	}
	d := newDrifter(opts, lim, initPid, res, stderr)
	// cordon run only waits on its command: the pages of its program
	// that a check mapped go back after it.
	d.checked = idlemem.Program
	go d.watch(false, done)
}
