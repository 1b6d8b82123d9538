package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// resolveBoxes keep, for each tool server, one sandbox of its profile in
// which the paths of its calls are resolved: each call that names a file
// is resolved before it is decided and again after the server acted, and
// a command started in a running sandbox costs a fraction of a new
// sandbox. The sandbox binds the workspace read-only (resolving writes
// nothing) and runs only cordon's resolver; one that ended (a limit) is
// started anew for the next call. They end with the gateway.
type resolveBoxes struct {
	e *env
	r *probeRunner

	mu     sync.Mutex
	boxes  map[string]*resolveBox
	closed bool
}

// resolveBox is one server's resolving sandbox.
type resolveBox struct {
	mu  sync.Mutex // held while it starts
	box *sandbox.Box
	a   *auditor
}

func newResolveBoxes(e *env, r *probeRunner) *resolveBoxes {
	return &resolveBoxes{e: e, r: r, boxes: map[string]*resolveBox{}}
}

// exec runs commands in the resolving sandbox of server, whose profile
// (read-only already) is sp.
func (rb *resolveBoxes) exec(ctx context.Context, server string, sp *profile.Profile) toolExec {
	return func(args []string, selfExec bool, stdin []byte, stdout, stderr func(io.Reader)) (outcome.Outcome, error) {
		box, a, err := rb.get(server, sp)
		if err != nil {
			return outcome.Outcome{}, err
		}
		if a != nil && a.log != nil {
			a.log.Add(a.execEvent(sp, args, rb.e.cwd, rb.e.getenv))
		}
		writers, done := readersOf(stdout, stderr)
		x := sandbox.ExecOptions{Args: args, SelfExec: selfExec, Stdout: writers[0], Stderr: writers[1]}
		if stdin != nil {
			x.Stdin = bytes.NewReader(stdin)
		}
		o, err := box.Exec(ctx, x)
		done()
		if a != nil && a.log != nil {
			a.log.Add(a.event(audit.Decision, "outcome", o))
			if aerr := a.log.Seal(); aerr != nil && err == nil {
				err = fmt.Errorf("audit log: %w", aerr)
			}
		}
		return o, err
	}
}

// get is server's resolving sandbox, started when it has none running.
func (rb *resolveBoxes) get(server string, sp *profile.Profile) (*sandbox.Box, *auditor, error) {
	rb.mu.Lock()
	if rb.closed {
		rb.mu.Unlock()
		return nil, nil, errors.New("the gateway is stopping: nothing is resolved any more")
	}
	b := rb.boxes[server]
	if b == nil {
		b = &resolveBox{}
		rb.boxes[server] = b
	}
	rb.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.box != nil && !b.box.Ended() && b.box.Why() == "" {
		return b.box, b.a, nil
	}
	if b.box != nil {
		b.box.Close()
	}
	var a *auditor
	opts := sandbox.Options{Profile: sp, AllowDegraded: rb.r.allow, Cwd: rb.e.cwd, LookupEnv: rb.e.getenv, WalkIndex: walkIndexDir(rb.e, sp), JournalDir: journalDir(rb.e, sp)}
	if rb.r.audit != nil {
		a = rb.r.audit.run(sp)
		if a.log != nil {
			if err := a.log.Append(a.startEvent(sp, "")); err != nil {
				return nil, nil, fmt.Errorf("audit log: %w (the resolving sandbox was not started)", err)
			}
		}
	}
	box, err := sandbox.Start(opts)
	if err != nil {
		return nil, nil, err
	}
	b.box, b.a = box, a
	return box, a, nil
}

// close ends every resolving sandbox. Nil-safe, and idempotent.
func (rb *resolveBoxes) close() {
	if rb == nil {
		return
	}
	rb.mu.Lock()
	rb.closed = true
	all := rb.boxes
	rb.boxes = map[string]*resolveBox{}
	rb.mu.Unlock()
	for _, b := range all {
		b.mu.Lock()
		if b.box != nil {
			b.box.Close()
		}
		b.mu.Unlock()
	}
}
