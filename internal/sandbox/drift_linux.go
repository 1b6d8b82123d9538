package sandbox

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/drift"
)

// watchDrift checks the running sandbox, every drift.every, against the
// state it had once its command ran confined (setup over): its namespaces,
// mount table, cgroup limits and profile file, and the confinement of each
// of its processes. A change stops the run with the drift outcome, or, with
// drift.action warn, is reported and becomes the new baseline.
func watchDrift(opts Options, lim *limiter, initPid int, res *Result, stderr io.Writer, done <-chan struct{}) {
	every := opts.Profile.DriftEvery()
	if every == 0 {
		return
	}
	var limits func() (map[string]string, error)
	if lim.group != nil {
		limits = lim.group.Settings
	}
	go func() {
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		for deadline := time.Now().Add(time.Minute); !drift.Confined(initPid); {
			select {
			case <-done:
				return
			case <-poll.C:
			}
			if time.Now().After(deadline) {
				return
			}
		}
		base, err := drift.Capture(initPid, limits, opts.ProfileFile)
		if err != nil {
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
			now, err := drift.Capture(initPid, limits, opts.ProfileFile)
			if err != nil {
				return // init has ended
			}
			changes := drift.Compare(base, now)
			if !anyWeakened() {
				changes = append(changes, drift.Unconfined(initPid, base.Namespaces)...)
			}
			if len(changes) == 0 {
				continue
			}
			if !opts.Profile.DriftStops() {
				fmt.Fprintf(stderr, "cordon: drift: %s\n", strings.Join(changes, "; "))
				base = now
				continue
			}
			fmt.Fprintf(stderr, "cordon: drift: %s; the sandbox is stopped\n", strings.Join(changes, "; "))
			res.setDrift(changes)
			lim.killAll()
			return
		}
	}()
}
