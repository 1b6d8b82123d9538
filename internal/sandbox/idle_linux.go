package sandbox

import (
	"context"
	"os"
)

// WhenIdle runs fn with the root of the layer of a reviewed or guarded
// workspace when nothing of the sandbox runs: no command, and no process
// but its init (a process a command left running in the background
// counts). Commands given meanwhile wait until fn returns, so that the
// layer holds still while fn reads it. It reports whether fn ran: not when
// the sandbox is busy, has ended or has no layer.
func (x *Box) WhenIdle(fn func(layer *os.File)) bool {
	if x.layer == nil {
		return false
	}
	x.mu.Lock()
	if x.ended || x.closing || x.running > 0 || x.quiet != nil || !onlyInit(x.b.init.pid, x.reaped) {
		x.mu.Unlock()
		return false
	}
	quiet := make(chan struct{})
	x.quiet = quiet
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.quiet = nil
		x.mu.Unlock()
		close(quiet)
	}()
	fn(x.layer)
	return true
}

// awaitQuiet waits, x.mu held (and held again when it returns), until no
// WhenIdle runs, or ctx ends.
func (x *Box) awaitQuiet(ctx context.Context) error {
	for x.quiet != nil {
		q := x.quiet
		x.mu.Unlock()
		select {
		case <-q:
		case <-ctx.Done():
			x.mu.Lock()
			return ctx.Err()
		}
		x.mu.Lock()
	}
	return nil
}

// onlyInit says whether init (pid, on the host) has no child: every
// process of the sandbox's pid namespace descends from it, and one whose
// parent ended becomes its child (or a subreaper's below it), so no child
// means no other process. What cannot be read counts as a child: it fails
// closed, as busy.
func onlyInit(pid int, reaped <-chan struct{}) bool {
	select {
	case <-reaped:
		return false
	default:
	}
	kids, complete := children(pid)
	return complete && len(kids) == 0
}
