package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Box is a sandbox kept alive: built once (namespaces, root, confinement,
// cgroup, egress proxy), then given commands, one after another or side by
// side, each with its own stdin, stdout and stderr, wall clock, output cap
// and outcome. Files it writes stay between commands; a command's process
// group ends with it.
//
// The profile's memory, pids and cpus limits, its CPU time and its egress
// budget hold for the whole sandbox: hitting one ends the sandbox, and every
// command still running reports that limit. Its wall and output limits hold
// for each command.
type Box struct {
	opts Options
	res  *Result // the sandbox's own facts
	lim  *limiter
	b    *booted
	ctl  *net.UnixConn // through Go's poller: no thread waits on it
	null *os.File      // /dev/null, the stdin of commands without input

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan Status
	running int
	last    time.Time // when a command last started or ended
	closing bool
	ended   bool
	// quiet is closed when the WhenIdle that runs ends; nil when none
	// does. Commands wait for it.
	quiet chan struct{}

	drift     *drifter      // nil when the profile asks for no drift checks
	reaped    chan struct{} // init has been reaped
	gone      chan struct{} // the dispatcher has seen init go
	stopDrift chan struct{}
	closeOnce sync.Once
	// layer is the root of a reviewed workspace's layer; nil otherwise.
	// watched is closed when the watch of its bounds has ended.
	layer   *os.File
	watched chan struct{}
	bound   *Layer // its bounds
	// protected are the protected paths of the view, and workdir the
	// working directory of a command given none, for a failing command's
	// message to be recognised by.
	protected []protectedPath
	workdir   string
}

// ErrEnded is returned by Exec once the sandbox has ended.
var ErrEnded = errors.New("the sandbox has ended")

// Start builds a sandbox from opts (Args, Stdin, Stdout, Stderr and Taps
// are not used) and returns once its init waits for commands.
func Start(opts Options) (*Box, error) {
	if opts.Profile != nil && opts.Profile.Workspace.Guarded() && opts.LayerDir == "" {
		// Its layer is on disk, never in memory.
		return nil, setupErr("workspace", errors.New("a guarded workspace (workspace.mode: guarded) needs a directory on disk for its layer"))
	}
	opts.keepAlive = true
	exe := opts.Exe
	if exe == nil {
		exe = SealedCopy()
		defer exe.Close()
	}
	res := &Result{}
	spec, lim, err := prepareSandbox(opts, res)
	if err != nil {
		return nil, err
	}
	spec.Serve = true
	lim.perCommand = true
	var built atomic.Pointer[Box] // the watcher starts before the Box exists
	lim.idle = func() bool { x := built.Load(); return x != nil && x.idle() > 0 }
	ok, ended := false, false
	defer func() {
		if !ok && !ended && lim.group != nil {
			lim.remove()
		}
		if !ok {
			lim.unprotect()
		}
	}()
	null, err := devNull(nil)
	if err != nil {
		return nil, setupErr("opening /dev/null", err)
	}
	defer func() {
		if !ok {
			null.Close()
		}
	}()
	mine, peer, err := controlPair()
	if err != nil {
		return nil, setupErr("control socket", err)
	}
	defer peer.Close()
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	b, err := boot(opts, spec, lim, res, exe, bootFiles{stdio: []*os.File{null, null, null}, console: peer, handed: []*os.File{peer}, stderr: log})
	if err != nil {
		mine.Close()
		return nil, err
	}
	fail := func(err error) (*Box, error) {
		b.init.kill()
		mine.Close()
		lim.end()
		ended = true
		if b.egressDone != nil {
			b.egressDone()
		}
		return nil, err
	}
	// Init closes the status pipe once it waits for commands.
	msgs := <-readStatuses(b.status)
	b.status.Close()
	ready := false
	for _, m := range msgs {
		switch m.Event {
		case "error":
			return fail(setupErr(m.Stage, errors.New(m.Error)))
		case "ready":
			ready, res.LandlockABI = true, m.LandlockABI
			if m.Note != "" {
				res.Notes = append(res.Notes, m.Note)
			}
		}
	}
	if !ready {
		return fail(setupErr("sandbox init", errors.New("ended before it was ready")))
	}
	var layer *os.File
	if b.layer != nil {
		// Init sends the layer before it says it is ready.
		if layer = <-b.layer; layer == nil {
			return fail(setupErr("workspace layer", errors.New("init sent none")))
		}
	}
	var drifter *drifter
	if opts.Profile.DriftEvery() > 0 {
		// Init is confined before it says it is ready: the baseline is
		// now, before any command could change anything.
		drifter = newDrifter(opts, lim, b.init.pid, res, log)
		if err := drifter.baseline(); err != nil {
			return fail(setupErr("drift baseline", err))
		}
	}
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return fail(setupErr("control socket", err))
	}
	now := time.Now()
	x := &Box{opts: opts, res: res, lim: lim, b: b, null: null, drift: drifter, ctl: conn.(*net.UnixConn), last: now,
		waiting: map[uint64]chan Status{}, reaped: make(chan struct{}), gone: make(chan struct{}), stopDrift: make(chan struct{}), layer: layer, bound: spec.Layer,
		protected: spec.protectedPaths(opts.Guard), workdir: spec.Workdir}
	if layer != nil {
		x.watched = make(chan struct{})
		go func() {
			defer close(x.watched)
			watchLayer(layer, spec.Layer, lim, x.stopDrift)
		}()
	}
	if lim.caches != nil {
		go lim.caches.watch(lim, x.stopDrift)
	}
	built.Store(x)
	go x.dispatch()
	go func() {
		b.init.wait()
		close(x.reaped)
	}()
	if x.drift != nil {
		go x.drift.watch(true, x.stopDrift)
	}
	ok = true
	return x, nil
}

// dispatch hands each message of init to the command it is about, until
// init is gone.
func (x *Box) dispatch() {
	buf := make([]byte, wire.MaxMessage)
	for {
		var st Status
		n, _, _, _, err := x.ctl.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			break // init is gone
		}
		if json.Unmarshal(buf[:n], &st) != nil {
			continue
		}
		x.mu.Lock()
		ch := x.waiting[st.ID]
		x.mu.Unlock()
		if ch != nil {
			ch <- st
		}
	}
	x.mu.Lock()
	x.ended = true
	for id, ch := range x.waiting {
		close(ch)
		delete(x.waiting, id)
	}
	x.mu.Unlock()
	close(x.gone)
}

// send sends a request to init, with files.
func (x *Box) send(r Request, files ...*os.File) error {
	b, oob, err := wire.EncodeMessage(r, files)
	if err != nil {
		return err
	}
	_, _, err = x.ctl.WriteMsgUnix(b, oob, nil)
	return err
}

// ExecOptions describe one command in a Box.
type ExecOptions struct {
	Args []string
	// Env is added to the profile's environment.
	Env []string
	// Dir is the working directory inside; "" is the sandbox's.
	Dir string
	// Stdin, Stdout and Stderr may be nil (no input, output discarded but
	// counted).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// SelfExec runs cordon itself (see Spec.SelfExec).
	SelfExec bool
	// Timeout, when above zero and shorter than the profile's wall limit,
	// ends the command in its place: the outcome then names the limit
	// "timeout" with this value.
	Timeout time.Duration
	// Terminal, when set, runs the command on a pseudo-terminal (see
	// Terminal): its output comes to Stdout, Stderr gets nothing.
	Terminal *Terminal
}

// Exec runs one command in the sandbox and returns its outcome, decided as
// for Run. Cancelling ctx kills the command. The error is ErrEnded when the
// sandbox had already ended, and a SetupError when the command could not be
// handed to the sandbox.
func (x *Box) Exec(ctx context.Context, e ExecOptions) (outcome.Outcome, error) {
	if len(e.Args) == 0 {
		err := setupErr("command", errors.New("no command given"))
		return outcome.Decide(outcome.Facts{Err: err}), err
	}
	x.mu.Lock()
	if err := x.awaitQuiet(ctx); err != nil {
		x.mu.Unlock()
		err = setupErr("command", fmt.Errorf("cancelled while the workspace's changes were being landed: %w", err))
		return outcome.Decide(outcome.Facts{Err: err}), err
	}
	if x.ended || x.closing {
		x.mu.Unlock()
		return outcome.Outcome{}, ErrEnded
	}
	x.nextID++
	id := x.nextID
	ch := make(chan Status, 2)
	x.waiting[id] = ch
	x.running++
	x.last = time.Now()
	x.mu.Unlock()
	x.lim.started()
	defer func() {
		x.mu.Lock()
		delete(x.waiting, id)
		x.running--
		x.last = time.Now()
		x.mu.Unlock()
	}()

	c := &command{box: x, id: id}
	o, err := c.run(ctx, e, ch)
	if err != nil {
		o = outcome.Decide(outcome.Facts{Err: err})
	}
	return o, err
}

// command is one Exec in progress.
type command struct {
	box *Box
	id  uint64

	mu       sync.Mutex
	killed   string // the limit that ended it
	canceled bool
}

// trip ends the command for a limit ("" when its caller cancelled it).
func (c *command) trip(limit string) {
	c.mu.Lock()
	first := c.killed == "" && !c.canceled
	if first {
		if limit == "" {
			c.canceled = true
		} else {
			c.killed = limit
		}
	}
	c.mu.Unlock()
	if first {
		c.box.send(Request{ID: c.id, Op: "signal", Signal: int(unix.SIGKILL)})
	}
}

func (c *command) run(ctx context.Context, e ExecOptions, ch <-chan Status) (outcome.Outcome, error) {
	x := c.box
	var closers []*os.File
	defer func() { closeAll(closers) }()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	var stdin, stdinWriter *os.File
	var err error
	fed := make(chan struct{}) // the copy of Stdin has ended
	if e.Stdin == nil {
		close(fed)
		stdin = x.null
	} else {
		r, w, err := pipe()
		if err != nil {
			return outcome.Outcome{}, setupErr("creating pipes", err)
		}
		stdin, stdinWriter = r, w
		go func() {
			defer close(fed)
			io.Copy(w, e.Stdin)
			w.Close()
		}()
	}
	outR, outW, err := pipe()
	if err != nil {
		return outcome.Outcome{}, setupErr("creating pipes", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return outcome.Outcome{}, setupErr("creating pipes", err)
	}
	// Identified before anything reads them, so that what identifies them
	// cannot change how they are read.
	ids := pipeIDs(outR, errR)
	stdout, stderr := orDiscard(e.Stdout), orDiscard(e.Stderr)
	dir := e.Dir
	if dir == "" {
		dir = x.workdir
	}
	capped := &outputCap{limit: quantity(x.opts.Profile.Resources.Output), marker: stderr, trip: func() { c.trip("output") },
		protected: protectedNames(x.protected, dir)}
	var copies sync.WaitGroup
	for _, p := range []struct {
		r   *os.File
		dst io.Writer
		err bool
	}{{outR, stdout, false}, {errR, stderr, true}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			pump(p.r, capped.writer(p.dst, p.err))
		}()
	}
	drained := make(chan struct{}) // both pipes read to their end (or cut)
	go func() {
		copies.Wait()
		close(drained)
	}()

	before := x.snapshot()
	start := time.Now()
	err = c.hand(e, stdin, outW, errW)
	if stdin != x.null {
		stdin.Close()
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		copies.Wait()
		if x.Ended() {
			return outcome.Outcome{}, ErrEnded
		}
		return outcome.Outcome{}, setupErr("handing the command to the sandbox", err)
	}
	// The wall limit, or the request's timeout when it is shorter.
	var wallTimer *time.Timer
	clock, d := commandClock(x.lim.res.Wall, e.Timeout)
	if d > 0 {
		wallTimer = time.AfterFunc(d, func() { c.trip(clock) })
		defer wallTimer.Stop()
	}
	finished := make(chan struct{}) // the command has ended
	finish := sync.OnceFunc(func() { close(finished) })
	defer finish()
	go func() {
		select {
		case <-ctx.Done():
			c.trip("")
		case <-finished:
		}
	}()

	res := &Result{LandlockABI: x.res.LandlockABI, Degraded: x.res.Degraded, Notes: append([]string(nil), x.res.Notes...),
		limiter: x.lim, output: capped}
	if clock == "timeout" {
		res.timeout = d
	}
	var last *Status
	for st := range ch {
		if st.Event == "exit" || st.Event == "exec-error" {
			last = &st
			break
		}
	}
	res.wall = time.Since(start)
	// The command has ended: neither the caller nor the wall clock kills
	// it any more, they only stop the wait for its output.
	finish()
	var wall <-chan time.Time
	if wallTimer != nil {
		// Past the limit, what the command's process group wrote is
		// still read, for the grace, as a holder's output would be.
		left := outputGrace
		if wallTimer.Stop() {
			left = max(0, d-time.Since(start))
		}
		t := time.NewTimer(left)
		defer t.Stop()
		wall = t.C
	}
	group := 0
	if last != nil && last.Event == "exit" {
		group = last.Pid
	}
	if note := c.awaitOutput(ctx, drained, [2]*os.File{outR, errR}, ids, group, wall); note != "" {
		res.Notes = append(res.Notes, note)
	}
	// The command's end makes the copy of its input fail, unless a process
	// that outlives it holds the input open: closing the pipe ends it.
	if w := stdinWriter; w != nil {
		w.Close()
	}
	select {
	case <-fed:
	case <-time.After(500 * time.Millisecond): // blocked reading the caller's Stdin
	}
	after := x.snapshot()
	res.stats = after.since(before)
	if x.layer != nil {
		// A command that filled the layer and ended before the watcher
		// looked: the limit ends the sandbox, and this command reports it.
		if u, err := useOf(x.layer, x.bound); err == nil && u.full != "" {
			x.lim.trip(u.full)
			c.mu.Lock()
			if c.killed == "" {
				c.killed = u.full
			}
			c.mu.Unlock()
		}
	}

	c.mu.Lock()
	res.killed = c.killed
	canceled := c.canceled
	c.mu.Unlock()
	switch {
	case last == nil:
		// The sandbox ended under the command.
		res.Signal = int(unix.SIGKILL)
		if k, evidence := x.lim.trippedWith(); k != "" {
			res.killed, res.killedEvidence = k, evidence
		} else if x.res.drifted() {
			res.drift = x.res.driftChanges()
		} else {
			res.Notes = append(res.Notes, "the sandbox was stopped while the command ran")
		}
	case last.Event == "exec-error":
		res.ExitCode, res.ExecError, res.exited = last.Code, last.Error, true
	default:
		res.ExitCode, res.Signal, res.exited, res.tmpUsed = last.Code, last.Signal, last.Signal == 0, last.TmpUsed
		res.otherSignal = last.OtherSignal
	}
	if canceled {
		res.Notes = append(res.Notes, "the command was cancelled by its caller")
	}
	if px := x.res.proxy; px != nil {
		events := px.Events()
		if len(events) > before.egress {
			res.egress = events[before.egress:]
		}
		if used := px.Exhausted(); used != "" && before.exhausted == "" {
			res.egressExhausted, res.egressBudget = used, x.opts.Profile.Network.Budget.Value(used)
		}
	}
	o := outcome.Decide(res.facts(nil))
	o.LandlockABI, o.Notes = res.LandlockABI, res.Notes
	return o, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// boxSnapshot is what a command's outcome is measured against.
type boxSnapshot struct {
	stats     cgroup.Stats
	egress    int
	exhausted string
}

func (x *Box) snapshot() boxSnapshot {
	var s boxSnapshot
	if x.lim.group != nil {
		s.stats, _ = x.lim.group.Stats()
	}
	if px := x.res.proxy; px != nil {
		s.egress, s.exhausted = len(px.Events()), px.Exhausted()
	}
	return s
}

// since returns the counters of s less those of an earlier snapshot; the
// peaks are the sandbox's.
func (s boxSnapshot) since(earlier boxSnapshot) cgroup.Stats {
	st := s.stats
	sub := func(now, then *int64) *int64 {
		if now == nil || then == nil {
			return now
		}
		d := *now - *then
		return &d
	}
	st.CPUUserNS = sub(s.stats.CPUUserNS, earlier.stats.CPUUserNS)
	st.CPUSystemNS = sub(s.stats.CPUSystemNS, earlier.stats.CPUSystemNS)
	st.CPUUsageNS = sub(s.stats.CPUUsageNS, earlier.stats.CPUUsageNS)
	st.OOMKills = s.stats.OOMKills - earlier.stats.OOMKills
	st.PidsMaxEvents = s.stats.PidsMaxEvents - earlier.stats.PidsMaxEvents
	return st
}

// CheckDrift checks the sandbox for drift now (as its profile's drift
// checks do every drift.every), and returns what changed; when the profile
// says stop, a change has stopped the sandbox. Without drift checks in the
// profile it does nothing.
func (x *Box) CheckDrift() []string {
	if x.drift == nil {
		return nil
	}
	return x.drift.check()
}

// Ended reports whether the sandbox has ended.
func (x *Box) Ended() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ended
}

// Done is closed once the sandbox's init has ended.
func (x *Box) Done() <-chan struct{} { return x.reaped }

// idle returns how long no command has run, 0 while one runs.
func (x *Box) idle() time.Duration {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.running > 0 {
		return 0
	}
	return time.Since(x.last)
}

// Why says what ended the sandbox: a limit's name, "drift", or "" when it
// was stopped (or still runs).
func (x *Box) Why() string {
	if k := x.lim.tripped(); k != "" {
		return k
	}
	if x.res.drifted() {
		return "drift"
	}
	return ""
}

// Close stops the sandbox: every process in it is killed, its cgroup
// removed, its proxy's connections ended. It waits for all of that; later
// calls do nothing.
func (x *Box) Close() { x.CloseWith(nil) }

// CloseWith is Close, calling kept, when the workspace is reviewed, with
// the layer's root once no process of the sandbox runs any more (to keep
// its changes); kept is not called when an earlier Close ended the box.
func (x *Box) CloseWith(kept func(layer *os.File)) {
	x.closeOnce.Do(func() {
		x.mu.Lock()
		x.closing = true
		x.mu.Unlock()
		x.b.init.signal(syscall.SIGKILL)
		<-x.reaped
		close(x.stopDrift)
		// A WhenIdle reading the layer finishes first.
		x.mu.Lock()
		x.awaitQuiet(context.Background())
		x.mu.Unlock()
		if x.layer != nil && kept != nil {
			kept(x.layer)
		}
		<-x.gone
		x.ctl.Close()
		x.null.Close()
		if x.b.egressDone != nil {
			x.b.egressDone()
		}
		x.lim.end()
		if c := x.lim.caches; c != nil {
			if o := c.end(); o.Error != "" && x.opts.Log != nil {
				fmt.Fprintf(x.opts.Log, "caches: %s\n", o.Error)
			}
		}
		if x.layer != nil {
			<-x.watched
			x.layer.Close()
		}
	})
}

// Layer is the root of the copy-on-write layer of a reviewed workspace
// (see Options.Review), holding LayerUpper; nil when the workspace is not
// reviewed. While the sandbox runs, what it holds may change at any
// moment; it is closed by Close.
func (x *Box) Layer() *os.File { return x.layer }
