package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/idlemem"
	"github.com/cordon-sandbox/cordon/internal/journal"
	"github.com/cordon-sandbox/cordon/internal/landlock"
	"github.com/cordon-sandbox/cordon/internal/mnt"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
	"github.com/cordon-sandbox/cordon/internal/seccomp"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// rootMapWeakened maps the sandbox user to host root; test builds only.
var rootMapWeakened bool

// nobody is the host id the sandbox user maps to when cordon runs as root
// and the workspace belongs to root: never host root itself.
const nobody = 65534

// Run builds the sandbox, runs the command in it, waits for it to end and
// returns the outcome. When the sandbox cannot be built or fails, the outcome
// says sandbox_error and err is the SetupError.
func Run(opts Options) (outcome.Outcome, error) {
	res := &Result{}
	err := withContainerHint(run(opts, res))
	o := outcome.Decide(res.facts(err))
	o.LandlockABI, o.Notes = res.LandlockABI, res.Notes
	o.Changes, o.Obeyed, o.ObeyedUnchecked = res.changes, res.obeyed, res.obeyedUnchecked
	o.Caches = res.caches
	return o, err
}

func run(opts Options, res *Result) error {
	exe := opts.Exe
	if exe == nil && opts.SelfExec {
		exe = SealedCopy()
	} else if exe == nil {
		exe = SealExecutable()
	}
	defer exe.Close()
	// Signals for cordon go to the command; a second SIGINT or SIGTERM
	// kills the sandbox. On a terminal, window changes reach the command
	// through the pseudo-terminal instead. Registering a signal waits for
	// the Go runtime's signal thread, so it happens while the rest is set
	// up; a signal that arrives meanwhile reaches the command once it runs.
	sigs := make(chan os.Signal, 16)
	forward := []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGCONT}
	if !UsesTerminal(opts.Stdin, opts.Stdout) {
		forward = append(forward, unix.SIGWINCH)
	}
	registered := make(chan struct{})
	go func() {
		signal.Notify(sigs, forward...)
		close(registered)
	}()
	defer func() {
		<-registered
		signal.Stop(sigs)
	}()
	spec, lim, err := prepareSandbox(opts, res)
	if err != nil {
		return err
	}
	ended := false
	defer func() {
		if !ended && lim.group != nil {
			lim.remove()
		}
		lim.unprotect()
	}()

	stdin, stdout, stderr := opts.Stdin, opts.Stdout, opts.Stderr
	for _, f := range []**os.File{&stdin, &stdout, &stderr} {
		if *f == nil {
			if *f, err = devNull(nil); err != nil {
				return setupErr("opening /dev/null", err)
			}
			defer (*f).Close()
		}
	}
	// What the command writes, and cordon's own lines while it runs, pass
	// through StderrLines when given (see Options).
	outDst, errDst, own := io.Writer(stdout), io.Writer(stderr), io.Writer(stderr)
	if l := opts.StderrLines; l != nil {
		errDst, own = l, l.Own()
		if SameFile(stdout, stderr) {
			outDst = l
		}
	}
	// The command's output passes through cordon, which counts it and cuts
	// it at the output limit.
	outCap := &outputCap{limit: quantity(opts.Profile.Resources.Output), marker: errDst, trip: func() { lim.trip("output") },
		protected: protectedNames(spec.protectedPaths(opts.Guard), spec.Workdir)}
	res.output = outCap

	var tty *terminal
	var copies sync.WaitGroup
	var console *os.File
	var handed []*os.File // pipe ends init takes over
	stdio := []*os.File{stdin, nil, nil}
	if UsesTerminal(opts.Stdin, opts.Stdout) {
		if tty, err = newTerminal(opts.Stdin, outCap.terminal(tapped(outDst, opts.Taps[0]))); err != nil {
			return setupErr("allocating a terminal", err)
		}
		defer tty.close()
		spec.TTY = true
		console = tty.Peer
		stdio[1], stdio[2] = stdout, stderr
	} else {
		// Standard input reaches the command through a pipe too, unless
		// it is a terminal: a host file, socket or device given as
		// standard input would otherwise be the sandbox's to fchmod,
		// futimes or talk back on.
		if !isTerminal(stdin) {
			r, w, err := os.Pipe()
			if err != nil {
				return setupErr("creating the input pipe", err)
			}
			defer r.Close()
			stdio[0] = r
			handed = append(handed, r)
			if opts.Stdin == nil {
				w.Close() // nothing to read: end of file at once
			} else {
				go func(src *os.File) {
					io.Copy(w, src)
					w.Close()
				}(stdin)
			}
		}
		for i, dst := range []io.Writer{outDst, errDst} {
			r, w, err := os.Pipe()
			if err != nil {
				return setupErr("creating output pipes", err)
			}
			defer r.Close()
			defer w.Close()
			stdio[i+1] = w
			handed = append(handed, w)
			copies.Add(1)
			go func(dst io.Writer, r *os.File) {
				defer copies.Done()
				io.Copy(dst, r)
			}(outCap.writer(tapped(dst, opts.Taps[i]), i == 1), r)
		}
	}
	begun := time.Now()
	b, err := boot(opts, spec, lim, res, exe, bootFiles{stdio: stdio, console: console, handed: handed, stderr: own, ready: registered})
	if err != nil {
		return err
	}
	dieAt("started")
	init := b.init
	// A command that runs on leaves cordon waiting: the heap its start
	// took goes back to the system then, not kept for the whole run.
	idle := time.AfterFunc(idleAfter, idlemem.Release)
	defer idle.Stop()

	done := make(chan struct{})
	defer close(done)
	watchDrift(opts, lim, init.pid, res, own, done)
	go func() {
		interrupts := 0
		for {
			select {
			case s := <-sigs:
				if s == unix.SIGINT || s == unix.SIGTERM {
					if interrupts++; interrupts > 1 {
						res.setInterrupted()
						b.kill()
						continue
					}
				}
				init.signal(s.(syscall.Signal))
			case <-done:
				return
			}
		}
	}()

	cachesStop := make(chan struct{})
	if lim.caches != nil {
		go lim.caches.watch(lim, cachesStop)
	}
	var layer *os.File
	layerDone, layerStop := make(chan struct{}), make(chan struct{})
	if b.layer != nil {
		go func() {
			defer close(layerDone)
			if layer = <-b.layer; layer != nil {
				watchLayer(layer, spec.Layer, lim, layerStop)
			}
		}()
	} else {
		close(layerDone)
	}
	statuses := readStatuses(b.status)
	if tty != nil {
		if err := tty.start(); err != nil {
			init.kill()
			<-statuses
			return setupErr("terminal", err)
		}
	}
	ws, ru, waitErr := init.wait()
	dieAt("ended")
	if b.layer != nil {
		// Init has ended, and every process of the sandbox with it.
		close(layerStop)
		<-layerDone
		keepChanges(opts, res, lim, layer, spec.Layer)
	}
	copies.Wait()
	if b.egressDone != nil {
		b.egressDone()
	}
	if tty != nil {
		tty.close()
	}
	ended = true
	close(cachesStop)
	res.killed, res.stats, res.wall = lim.end()
	if k, evidence := lim.trippedWith(); k == res.killed {
		res.killedEvidence = evidence
	}
	if lim.caches != nil {
		res.caches = lim.caches.end()
	}
	findMade(spec, opts, begun, res)
	for _, dir := range spec.restored {
		res.Notes = append(res.Notes, fmt.Sprintf("the sandbox changed the permissions of %s; cordon set them back", dir))
	}
	res.rusage = ru
	return res.finish(<-statuses, ws, waitErr)
}

// idleAfter is how long a command runs before cordon, waiting on it,
// returns the memory it no longer uses.
const idleAfter = time.Second

// prepareSandbox builds the spec and the limiter (with the sandbox's cgroup) of a
// sandbox, refusing when a layer is missing that the user did not allow to
// go without.
func prepareSandbox(opts Options, res *Result) (*Spec, *limiter, error) {
	spec, err := buildSpec(opts)
	if err != nil {
		return nil, nil, err
	}
	notes, err := addToolchains(spec, opts)
	if err != nil {
		spec.release()
		return nil, nil, err
	}
	res.Notes = append(res.Notes, notes...)
	caches, err := addCaches(spec, opts, res)
	if err != nil {
		spec.release()
		return nil, nil, err
	}
	if err := checkLayers(spec, opts.AllowDegraded, res); err != nil {
		spec.release()
		return nil, nil, err
	}
	spec.Weaken = Weakenings{NetNS: weakened("netns"), UsernsLimit: weakened("userns-limit"), Caps: weakened("caps"), ProcMasks: weakened("proc-masks"),
		IPCNS: weakened("ipcns"), UTSNS: weakened("utsns"), Dumpable: weakened("dumpable"), FDs: weakened("fds"), NNP: weakened("nnp"),
		InitSignals: weakened("init-signals"), UserLimits: weakened("user-limits"),
		Refer: weakened("refer")}
	if weakened("seccomp") {
		spec.Seccomp = false
	}
	if weakened("landlock") {
		spec.Landlock = false
	}
	if weakened("root-map") {
		rootMapWeakened = true
	}
	if weakened("tmp-size") {
		spec.TmpSize = 0 // tmpfs without a size: half the host's memory
	}
	lim, err := newLimiter(opts.Profile, opts.AllowDegraded, spec, res)
	if err != nil {
		spec.release()
		return nil, nil, err
	}
	// The placeholders go when the limiter ends, however the sandbox does.
	lim.release = spec.release
	lim.caches = caches
	if weakened("nofile") {
		spec.Rlimits.OpenFiles = 0
	}
	res.limiter = lim
	return spec, lim, nil
}

// bootFiles are the descriptors a caller of boot prepared for init.
type bootFiles struct {
	stdio   []*os.File // init's 0, 1, 2
	console *os.File   // ConsoleFD (ControlFD when the spec says Serve)
	// handed are cordon's copies of descriptors init takes over, closed
	// once it has them.
	handed []*os.File
	stderr io.Writer // where the egress proxy reports refusals
	// ready, when set, is waited for just before init starts.
	ready <-chan struct{}
}

// booted is a started init, placed in its cgroup, with its spec sent.
type booted struct {
	init   *process
	status *os.File // init's Status messages
	// egressDone, when there is an egress proxy, waits for its
	// connections to end and records its events.
	egressDone func()
	kill       func() // kills init, and so the sandbox
	// layer yields a reviewed workspace's layer (see layerSocket); nil
	// otherwise.
	layer <-chan *os.File
}

// boot starts the sandbox's init in its namespaces and cgroup, sends it the
// spec and starts the limiter's clocks. On an error, nothing of it is left
// running.
func boot(opts Options, spec *Spec, lim *limiter, res *Result, exe *Executable, bf bootFiles) (*booted, error) {
	rootMode := os.Geteuid() == 0
	ids := idMapping{uid: os.Geteuid(), gid: os.Getegid()}
	var files []*os.File
	var err error
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if rootMode {
		ids = rootIDs(spec)
		if rootMapWeakened {
			ids = idMapping{}
		}
		files, err = openTrees(spec, ids, false)
		var unmapped *idmapError
		if errors.As(err, &unmapped) {
			if !opts.AllowDegraded[LayerIdmap] {
				return nil, setupErr(LayerIdmap, unmapped.refusal())
			}
			// As bubblewrap does: the sandbox user is the bind's owner.
			ids = idMapping{uid: int(unmapped.uid), gid: int(unmapped.gid)}
			files, err = openTrees(spec, ids, true)
			res.Degraded = append(res.Degraded, LayerIdmap)
			// The kernel exempts host root from RLIMIT_NPROC: without a
			// cgroup, nothing then counts the sandbox's processes.
			lim.hostRoot = ids.uid == 0
		}
		if err != nil {
			return nil, err
		}
		if len(spec.cachesLeft) > 0 {
			spec.dropCaches()
			res.Notes = append(res.Notes, "the agent's caches are not kept on this run: "+strings.Join(spec.cachesLeft, "; "))
			lim.caches = nil
		}
	}

	exeFile, err := exe.File()
	if err != nil {
		return nil, setupErr("protecting the cordon binary", err)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, setupErr("creating spec pipe", err)
	}
	defer specR.Close()
	defer specW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, setupErr("creating status pipe", err)
	}
	ok := false
	defer func() {
		if !ok {
			statusR.Close()
		}
	}()
	defer statusW.Close()

	// Descriptors of init: SpecFD, StatusFD, ConsoleFD (or ControlFD),
	// ProxyFD, LayerFD, SelfFD, then the detached mounts from FirstFD on.
	extra := []*os.File{specR, statusW, bf.console}
	extra = append(extra, nil, nil, nil) // ProxyFD, LayerFD, SelfFD
	if spec.SelfExec || spec.Serve {
		if extra[SelfFD-SpecFD] = exe.Self(); extra[SelfFD-SpecFD] == nil {
			return nil, setupErr("protecting the cordon binary", errors.New("no sealed copy of cordon for a command that is cordon"))
		}
		if weakened("exeseal") { // the binary on disk, as if not sealed
			disk, err := os.Open("/proc/self/exe")
			if err != nil {
				return nil, setupErr("protecting the cordon binary", err)
			}
			defer disk.Close()
			extra[SelfFD-SpecFD] = disk
		}
	}
	var layer <-chan *os.File
	if spec.Layer != nil {
		var own *os.File
		if spec.Layer.Dir != "" {
			if own, err = openLayerDir(spec.Layer.Dir); err != nil {
				return nil, setupErr("workspace layer", err)
			}
		}
		peer, got, err := layerSocket(own)
		if err != nil {
			if own != nil {
				own.Close()
			}
			return nil, setupErr("workspace layer", err)
		}
		defer peer.Close()
		extra[LayerFD-SpecFD], layer = peer, got
	}
	var egressDone func()
	if spec.ProxyAddr != "" {
		peer, done, err := startProxy(opts, res, bf.stderr, func() { lim.trip(deniedLimit) })
		if err != nil {
			return nil, setupErr("egress proxy", err)
		}
		defer peer.Close()
		extra[ProxyFD-SpecFD] = peer
		egressDone = done
	}
	extra = append(extra, files...)

	sys := &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: spec.UID, HostID: ids.uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: spec.GID, HostID: ids.gid, Size: 1}},
		// Init keeps these capabilities (in its own user namespace only)
		// to build the root; it drops them before the command starts.
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE},
		Pdeathsig:   unix.SIGKILL,
	}
	if spec.Layer != nil {
		// The overlay of a reviewed workspace copies files up, and writes
		// whiteouts, with the credentials of init that mounted it; in the
		// sandbox's user namespace only, over the files it maps.
		sys.AmbientCaps = append(sys.AmbientCaps, unix.CAP_DAC_OVERRIDE, unix.CAP_CHOWN, unix.CAP_FOWNER, unix.CAP_MKNOD)
	}
	if weakened("pdeathsig") {
		sys.Pdeathsig = 0
	}
	if spec.Weaken.NetNS {
		sys.Cloneflags &^= unix.CLONE_NEWNET
	}
	if spec.Weaken.IPCNS {
		sys.Cloneflags &^= unix.CLONE_NEWIPC
	}
	if spec.Weaken.UTSNS {
		sys.Cloneflags &^= unix.CLONE_NEWUTS
	}
	if spec.Weaken.Caps { // test builds only: every capability reaches the command
		sys.AmbientCaps = nil
		for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
			sys.AmbientCaps = append(sys.AmbientCaps, c)
		}
	}
	if rootMode {
		// Drop host root's supplementary groups, which would otherwise still
		// grant access to group-readable host files.
		sys.GidMappingsEnableSetgroups = true
		sys.Credential = &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), Groups: []uint32{}}
	}

	if bf.ready != nil {
		<-bf.ready
	}
	initPath := fdPath(exeFile)
	if weakened("exeseal") {
		initPath = "/proc/self/exe" // the binary on disk, as if not sealed
	}
	var init *process
	placed, err := lim.spawn(sys, func() (err error) {
		init, err = startOwned(initPath, []string{"cordon", InitArg}, append(bf.stdio, extra...), sys)
		if err != nil {
			return setupErr("creating the sandbox namespaces", namespaceHint(err))
		}
		return nil
	})
	if err != nil {
		if init != nil {
			init.kill()
		}
		return nil, err
	}
	specR.Close()
	statusW.Close()
	if peer := extra[ProxyFD-SpecFD]; peer != nil {
		peer.Close() // init holds it now; its closing ends the proxy's loop
	}
	if peer := extra[LayerFD-SpecFD]; peer != nil {
		peer.Close() // init's ending closes it, if it sends nothing
	}
	for _, f := range bf.handed {
		f.Close()
	}
	for _, f := range files {
		f.Close()
	}
	files = nil
	// The spec goes first, so that init builds the root while it is moved
	// into its cgroups, when it did not start there (a process move waits
	// for an RCU grace period); closing the pipe tells init it is in place
	// and may start the command.
	if err := wire.WriteSpec(specW, &spec.Spec); err != nil {
		init.kill()
		return nil, setupErr("sending the spec", err)
	}
	killInit := func() { init.signal(unix.SIGKILL) }
	if err := lim.begin(init.pid, placed, killInit); err != nil {
		init.kill()
		return nil, err
	}
	// A write that fails means init has already ended (it could not build
	// the root, say); its status says why.
	io.WriteString(specW, Placed)
	specW.Close()
	ok = true
	return &booted{init: init, status: statusR, egressDone: egressDone, kill: killInit, layer: layer}, nil
}

// finish interprets init's messages and its own exit.
func (res *Result) finish(msgs []Status, ws unix.WaitStatus, waitErr error) error {
	for _, m := range msgs {
		switch m.Event {
		case "error":
			return setupErr(m.Stage, errors.New(m.Error))
		case "started":
			res.LandlockABI = m.LandlockABI
			if m.Note != "" {
				res.Notes = append(res.Notes, m.Note)
			}
		case "exec-error":
			res.ExitCode, res.ExecError, res.exited = m.Code, m.Error, true
			return nil
		case "exit":
			res.ExitCode, res.Signal, res.exited, res.tmpUsed = m.Code, m.Signal, m.Signal == 0, m.TmpUsed
			res.otherSignal = m.OtherSignal
			return nil
		}
	}
	// Init was killed before it could report: by cordon, for a limit, a
	// drift or a second interrupt, which ends the command with it.
	if res.killed != "" || res.interrupted() || res.drifted() {
		res.Signal = int(unix.SIGKILL)
		return nil
	}
	switch {
	case waitErr != nil:
		return setupErr("sandbox init", fmt.Errorf("ended without reporting: %w", waitErr))
	case ws.Signaled():
		return setupErr("sandbox init", fmt.Errorf("killed by %s without reporting", unix.SignalName(ws.Signal())))
	}
	return setupErr("sandbox init", fmt.Errorf("exited with status %d without reporting", ws.ExitStatus()))
}

func readStatuses(r *os.File) <-chan []Status {
	out := make(chan []Status, 1)
	go func() {
		var msgs []Status
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var s Status
			if json.Unmarshal(sc.Bytes(), &s) == nil {
				msgs = append(msgs, s)
			}
		}
		out <- msgs
	}()
	return out
}

func namespaceHint(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w (are unprivileged user namespaces enabled? see `cordon doctor`)", err)
	}
	return err
}

// The host's layers, as functions so that tests can take them away.
var (
	seccompAvailable = seccomp.Available
	landlockABI      = landlock.ABI
)

// checkLayers refuses to run without seccomp or Landlock unless the user
// allowed it, and records what was skipped.
func checkLayers(spec *Spec, allow map[string]bool, res *Result) error {
	if err := seccompAvailable(); err != nil {
		if !allow[LayerSeccomp] {
			return setupErr("seccomp", fmt.Errorf("%w; refusing to run without it (--allow-degraded=seccomp runs anyway)", err))
		}
		spec.Seccomp = false
		res.Degraded = append(res.Degraded, LayerSeccomp)
	}
	switch abi := landlockABI(); {
	case abi < 1:
		if !allow[LayerLandlock] {
			return setupErr("landlock", errors.New("the kernel has no Landlock; refusing to run without it (--allow-degraded=landlock runs anyway)"))
		}
		spec.Landlock = false
		res.Degraded = append(res.Degraded, LayerLandlock)
	case abi < landlock.MinABI:
		if !allow[LayerLandlock] {
			return setupErr("landlock", fmt.Errorf("this kernel offers Landlock ABI %d; cordon needs ABI %d (device ioctls, IPC scoping); refusing to run with less (--allow-degraded=landlock enforces what ABI %d offers)", abi, landlock.MinABI, abi))
		}
		res.Degraded = append(res.Degraded, fmt.Sprintf("%s (ABI %d of %d)", LayerLandlock, abi, landlock.MinABI))
	}
	return nil
}

// buildSpec turns the profile and options into the Spec init receives.
func buildSpec(opts Options) (*Spec, error) {
	p := opts.Profile
	if len(opts.Args) == 0 && !opts.keepAlive {
		return nil, setupErr("command", errors.New("no command given"))
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	env := p.Environ(lookup)
	spec := &Spec{Spec: wire.Spec{
		Hostname: p.Hostname,
		UserName: p.User.Name,
		UID:      p.User.UID,
		GID:      p.User.GID,
		Home:     p.User.Home(),
		TmpSize:  p.Resources.TmpSize.N,
		Workdir:  p.User.Home(),
		Env:      env,
		Args:     opts.Args,
		SelfExec: opts.SelfExec,
		Landlock: true,
		Seccomp:  true,
	}}
	spec.Path = wire.PathOf(env)
	if opts.JournalDir != "" && !weakened("cgroup-cleanup") {
		spec.journal = journal.Process(opts.JournalDir)
		spec.jid = spec.journal.New()
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		spec.Mounts = append(spec.Mounts, Mount{Source: "/dev/" + d, Target: "/dev/" + d, Device: true, Writable: true})
	}
	targets := map[string]string{}
	for _, m := range p.Mounts {
		spec.Mounts = append(spec.Mounts, Mount{Source: m.Path, Target: m.Dest(), Writable: m.Writable, Optional: m.Optional})
		targets[m.Dest()] = m.Path
	}
	if p.Network.Enabled() {
		// The only way out: cordon's proxy, through init's relay.
		spec.ProxyAddr = ProxyAddr
		proxyURL := "http://" + ProxyAddr
		for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			spec.Env = wire.SetEnv(spec.Env, name, proxyURL)
		}
		for _, name := range []string{"ALL_PROXY", "all_proxy"} {
			spec.Env = wire.SetEnv(spec.Env, name, "socks5h://"+ProxyAddr)
		}
		// The sandbox's own loopback (a dev server it runs and tests) is
		// reached directly, unless the profile sends loopback to the
		// host's through the proxy.
		if !allowsLoopback(p.Network.Allow) {
			for _, name := range []string{"NO_PROXY", "no_proxy"} {
				spec.Env = wire.SetEnv(spec.Env, name, "localhost,127.0.0.1,::1")
			}
		}
		if p.Network.Transparent {
			// DNS goes to cordon's resolver, through a synthetic resolv.conf.
			spec.Transparent = true
			mounts := spec.Mounts[:0]
			for _, m := range spec.Mounts {
				if m.Target != "/etc/resolv.conf" {
					mounts = append(mounts, m)
				}
			}
			spec.Mounts = mounts
		}
	}
	if ws := p.Workspace.Path; ws != "" {
		if !filepath.IsAbs(ws) {
			ws = filepath.Join(opts.Cwd, ws)
		}
		ws = filepath.Clean(ws)
		if err := checkDir(ws); err != nil {
			return nil, setupErr("workspace", err)
		}
		target := p.Workspace.Target
		if target == "" {
			target = ws
		}
		if msg := profile.TargetProblem(target); msg != "" {
			return nil, setupErr("workspace "+ws, fmt.Errorf("%s; run cordon from a project directory or choose one with --workspace DIR", msg))
		}
		if prev, dup := targets[target]; dup {
			return nil, setupErr("workspace", fmt.Errorf("%s is also the target of the mount of %s", target, prev))
		}
		review := p.Workspace.Reviewed()
		spec.Mounts = append(spec.Mounts, Mount{Source: ws, Target: target, Writable: p.Workspace.Writable && !review, Review: review})
		spec.Workdir = target
		if sub := opts.Subdir; sub != "" && sub != "." {
			if !filepath.IsLocal(sub) {
				return nil, setupErr("workspace", fmt.Errorf("the working directory %s is not beneath the workspace", sub))
			}
			spec.workspace, spec.Workdir = target, filepath.Join(target, sub)
		}
		if review {
			spec.Layer = &Layer{Size: p.Resources.WorkspaceSize.N, Inodes: p.Resources.WorkspaceInodes.N}
			if p.Workspace.Guarded() && opts.LayerDir != "" {
				spec.Layer.Dir = opts.LayerDir
				noteFree(opts.LayerDir, spec.Layer)
			}
			// A writable bind of part of the reviewed tree, of a
			// directory holding it, or into it, would write the host's
			// tree past the review.
			within := func(p, dir string) bool { _, ok := pathglob.Within(p, dir); return ok }
			for _, m := range spec.Mounts {
				if m.Writable && !m.Device && (within(m.Source, ws) || within(ws, m.Source) || within(m.Target, target)) {
					return nil, setupErr("workspace", fmt.Errorf("the workspace %s is reviewed, but %s is bound writable %s: its writes would reach the host's tree unreviewed; bind it read-only, or outside the workspace", ws, m.Source, "at "+m.Target))
				}
			}
		}
	}
	if err := refuseSensitive(spec, opts); err != nil {
		return nil, err
	}
	if err := protectWritable(spec, opts); err != nil {
		return nil, err
	}
	dieAt("placeholders")
	return spec, nil
}

// protectWritable plans, for every writable directory bound into the view,
// the paths the host's tools obey that stay read-only inside (see package
// protect).
func protectWritable(spec *Spec, opts Options) error {
	ws := opts.Profile.Workspace
	if weakened("protect") { // test builds only: every writable bind writable throughout
		return nil
	}
	for i, m := range spec.Mounts {
		if !m.Writable || m.Device {
			continue
		}
		if fi, err := os.Lstat(m.Source); err != nil || !fi.IsDir() {
			continue
		}
		var extra []string
		for _, g := range opts.Guard {
			if rel, err := filepath.Rel(m.Source, g); err == nil && rel != "." && !strings.HasPrefix(rel, "../") {
				extra = append(extra, rel)
			}
		}
		o := protect.Options{Unprotect: ws.Unprotect, Extra: extra, SameUser: os.Geteuid() != 0}
		if j := spec.journal; j != nil {
			// Each placeholder is in the journal as soon as it is made.
			o.Made = func(token string) error { return j.Placeholder(spec.jid, token) }
		}
		plan, err := protect.Make(m.Source, o)
		if err != nil {
			spec.release()
			return setupErr("protected paths", err)
		}
		spec.plans = append(spec.plans, plan)
		spec.Mounts[i].Protect = plan.Entries
		spec.Placeholders = append(spec.Placeholders, plan.PlaceholderIDs()...)
		if spec.atWorkspace(m.Target) {
			ignoreInGit(spec, plan.Placeholders())
		}
		if slices.Contains(plan.Placeholders(), ".git") {
			// Go stamps what it builds with the state of the repository
			// it builds in; the placeholder is no repository git can read,
			// and go build would fail on it.
			flags := strings.TrimSpace(wire.EnvValue(spec.Env, "GOFLAGS") + " -buildvcs=false")
			spec.Env = wire.SetEnv(spec.Env, "GOFLAGS", flags)
		}
	}
	return nil
}

// ignoreInGit has the sandbox's git ignore the placeholders at the
// workspace's root (except .git itself), through an excludes file of
// cordon's and core.excludesFile in the environment (GIT_CONFIG_COUNT,
// after any the environment already sets).
func ignoreInGit(spec *Spec, placeholders []string) {
	var b strings.Builder
	for _, rel := range placeholders {
		if rel != ".git" && !strings.Contains(rel, "/") {
			fmt.Fprintf(&b, "/%s\n", rel)
		}
	}
	if b.Len() == 0 {
		return
	}
	spec.GitIgnore = "# placeholders cordon keeps in place of protected paths\n" + b.String()
	n, _ := strconv.Atoi(wire.EnvValue(spec.Env, "GIT_CONFIG_COUNT"))
	spec.Env = wire.SetEnv(spec.Env, fmt.Sprintf("GIT_CONFIG_KEY_%d", n), "core.excludesFile")
	spec.Env = wire.SetEnv(spec.Env, fmt.Sprintf("GIT_CONFIG_VALUE_%d", n), GitIgnoreFile)
	spec.Env = wire.SetEnv(spec.Env, "GIT_CONFIG_COUNT", strconv.Itoa(n+1))
}

// checkDir verifies that p is a directory reached without symlinks.
func checkDir(p string) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		hint := ""
		if real, rerr := filepath.EvalSymlinks(p); rerr == nil {
			// The link may be a sandbox's, its target any text.
			hint = fmt.Sprintf(" (%s)", termsafe.Line(real))
		}
		return fmt.Errorf("%s: %w%s", p, mnt.ErrSymlink, hint)
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	unix.Close(fd)
	return nil
}

// idMapping is the host uid and gid the sandbox user maps to.
type idMapping struct{ uid, gid int }

// rootIDs picks, for a cordon running as root, the host ids of the sandbox
// user: those of the workspace's owner when that is not root, so that what
// the command creates belongs to the owner; nobody otherwise.
func rootIDs(spec *Spec) idMapping {
	ids := idMapping{uid: nobody, gid: nobody}
	for _, m := range spec.Mounts {
		if !spec.atWorkspace(m.Target) || m.Device {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(m.Source, &st); err == nil && st.Uid != 0 {
			ids = idMapping{uid: int(st.Uid), gid: int(st.Gid)}
		}
	}
	return ids
}

// openTrees opens every bind source on the host side (as root, which can
// reach paths the sandbox user could not) and returns the detached mounts,
// recording their descriptor numbers in the spec. Writable mounts owned by
// someone other than the sandbox user's host id are idmapped to it; where
// the file system refuses that, openTrees fails with an *idmapError, or,
// when lenient, binds the mount as it is.
func openTrees(spec *Spec, ids idMapping, lenient bool) ([]*os.File, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	im := &idmapper{ids: ids, userns: map[[2]uint32]*os.File{}}
	defer im.close()
	spec.cachesLeft = nil
	for i := range spec.Mounts {
		m := &spec.Mounts[i]
		isCache := slices.Contains(spec.caches, m.Target)
		if isCache {
			m.Missing = false
		}
		src, err := mnt.Open(m.Source, m.Attrs(), !m.Writable)
		if err != nil {
			if m.Optional && errors.Is(err, unix.ENOENT) {
				m.Missing = true
				continue
			}
			return fail(setupErr("mount "+m.Source, err))
		}
		if src.Kind == mnt.Symlink {
			m.Link = src.Link
			continue
		}
		if (m.Writable || m.Review) && !m.Device {
			var st unix.Stat_t
			if err := unix.Fstat(int(src.Tree.Fd()), &st); err != nil {
				src.Close()
				return fail(setupErr("mount "+m.Source, err))
			}
			nsErr, err := im.idmap(src.Tree, &st)
			if nsErr != nil {
				src.Close()
				return fail(setupErr("idmapping "+m.Source, nsErr))
			}
			if err != nil && !lenient && isCache {
				// The agent's caches serve speed, not the view: without an
				// idmapping they are left out of the run, not the run.
				spec.cachesLeft = append(spec.cachesLeft, fmt.Sprintf("%s is on %s, which cannot be idmapped", m.Source, fsTypeOf(src.Tree)))
				src.Close()
				m.Missing = true
				continue
			}
			if err != nil && !lenient {
				unmapped := &idmapError{path: m.Source, fsType: fsTypeOf(src.Tree), uid: st.Uid, gid: st.Gid, to: ids.uid, err: err, review: m.Review}
				src.Close()
				return fail(unmapped)
			}
		}
		m.Tree = FirstFD + len(files)
		files = append(files, src.Tree)
	}
	if l := spec.Layer; l != nil && l.Dir != "" {
		tree, err := openLayer(l.Dir, im)
		if err != nil {
			return fail(setupErr("workspace layer "+l.Dir, err))
		}
		l.Tree = FirstFD + len(files)
		files = append(files, tree)
	}
	return files, nil
}

// openLayer opens the host directory of a guarded workspace's layer as a
// detached mount, without set-id or device files, idmapped as a writable
// bind is: what the sandbox user writes there is its owner's on disk.
func openLayer(dir string, im *idmapper) (*os.File, error) {
	src, err := mnt.Open(dir, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Tree.Fd()), &st); err != nil || src.Kind != mnt.Dir {
		src.Close()
		return nil, fmt.Errorf("not a directory (%v)", err)
	}
	nsErr, err := im.idmap(src.Tree, &st)
	if nsErr != nil {
		src.Close()
		return nil, fmt.Errorf("idmapping: %w", nsErr)
	}
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("idmapping (%s): %w", fsTypeOf(src.Tree), err)
	}
	return src.Tree, nil
}

// idmapper idmaps detached mounts to the sandbox user's host ids, with a
// user namespace for each owner it meets.
type idmapper struct {
	ids    idMapping
	userns map[[2]uint32]*os.File
}

// idmap idmaps tree, whose root st describes, unless its owner is the
// sandbox user's host ids already: nsErr when no user namespace could be
// made for it, err when the file system refuses the mapping.
func (im *idmapper) idmap(tree *os.File, st *unix.Stat_t) (nsErr, err error) {
	if int(st.Uid) == im.ids.uid && int(st.Gid) == im.ids.gid {
		return nil, nil
	}
	key := [2]uint32{st.Uid, st.Gid}
	userns, ok := im.userns[key]
	if !ok {
		if userns, err = newUserns(st.Uid, uint32(im.ids.uid), st.Gid, uint32(im.ids.gid)); err != nil {
			return err, nil
		}
		im.userns[key] = userns
	}
	return nil, mnt.Idmap(tree, int(userns.Fd()))
}

func (im *idmapper) close() {
	for _, f := range im.userns {
		f.Close()
	}
}

// newUserns returns a user namespace whose only mapping sends the on-disk
// owner ids to the sandbox user's host ids, for an idmapped mount. A helper
// process is started in a new user namespace only to hold it while cordon
// opens it: traced, the helper stops at its first instruction, so the Go
// runtime of the binary it runs never starts. Where tracing is not allowed
// (Yama), it runs as `cordon __hold` instead. The namespace belongs to
// cordon's user namespace owner (see usernsOwner); where root may not open
// a namespace it does not own (a container's root, without
// CAP_SYS_PTRACE), it belongs to root, which the mapping does not involve.
func newUserns(fromUID, toUID, fromGID, toGID uint32) (*os.File, error) {
	f, err := holdUserns(fromUID, toUID, fromGID, toGID, startOwned)
	if errors.Is(err, unix.EACCES) && os.Geteuid() == 0 {
		f, err = holdUserns(fromUID, toUID, fromGID, toGID, start)
	}
	return f, err
}

func holdUserns(fromUID, toUID, fromGID, toGID uint32, starter func(string, []string, []*os.File, *syscall.SysProcAttr) (*process, error)) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer w.Close()
	sys := &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(fromUID), HostID: int(toUID), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(fromGID), HostID: int(toGID), Size: 1}},
		Pdeathsig:   unix.SIGKILL,
		Ptrace:      true,
	}
	helper, err := starter(helperPath(), []string{"cordon", HoldArg}, []*os.File{r}, sys)
	if errors.Is(err, unix.EPERM) {
		sys.Ptrace = false
		helper, err = starter(helperPath(), []string{"cordon", HoldArg}, []*os.File{r}, sys)
	}
	if err != nil {
		return nil, fmt.Errorf("starting id-mapping helper: %w", err)
	}
	defer func() {
		// Reaped in the background: a process that is ending need not hold
		// up the sandbox's start.
		helper.signal(unix.SIGKILL)
		go helper.wait()
	}()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", helper.pid))
	if err != nil {
		return nil, fmt.Errorf("opening helper's user namespace: %w", err)
	}
	return f, nil
}

// tapped sends what is written to dst to tap as well, when there is one.
func tapped(dst io.Writer, tap io.Writer) io.Writer {
	if tap == nil {
		return dst
	}
	return io.MultiWriter(dst, tap)
}

// deniedLimit is the limiter's name for the egress budget of refusals,
// which ends the sandbox when used up; the outcome reports it as the
// egress budget it is (egress_denied), from the proxy.
const deniedLimit = "max_denied"

// printable makes text the sandbox chose safe for cordon's stderr (see
// termsafe), except in a test build told to leave it as it is.
func printable(s string) string {
	if weakened("text-escape") {
		return s
	}
	return termsafe.Line(s)
}

// ProxyAddr is where the proxy answers inside the sandbox.
const ProxyAddr = "127.0.0.1:3128"

// startProxy runs the egress proxy for one sandbox: it returns the socket
// end init receives connections on, and a function that waits (briefly)
// for the proxy's connections to end and records its events in res.
func startProxy(opts Options, res *Result, stderr io.Writer, end func()) (*os.File, func(), error) {
	p := opts.Profile
	pol, err := p.Network.Policy()
	if err != nil {
		return nil, nil, err
	}
	b := p.Network.Budget
	px := &egress.Proxy{
		Policy:          pol,
		Budget:          egress.Budget{BytesOut: quantity(b.BytesOut), BytesIn: quantity(b.BytesIn), Connections: quantity(b.Connections), Denied: quantity(b.MaxDenied)},
		OnDeny:          func(reason string) { fmt.Fprintf(stderr, "cordon: egress denied: %s\n", printable(reason)) },
		OnDecision:      opts.OnEgress,
		OnDenialsUsedUp: end,
		Resolve:         opts.Resolve,
		NoSNICheck:      weakened("egress-sni"),
		LookupFirst:     weakened("egress-names"),
		NoHeadLimit:     weakened("egress-limits"),
	}
	if weakened("text-escape") { // test builds only
		egress.RawNames = true
	}
	res.proxy = px
	if weakened("egress-policy") { // test builds only: every destination allowed
		for _, all := range []string{"0.0.0.0/0", "::/0"} {
			pol.Allow = append(pol.Allow, egress.Rule{Text: "weakened", Prefix: netip.MustParsePrefix(all)})
		}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	mine, peer := os.NewFile(uintptr(fds[0]), "proxy"), os.NewFile(uintptr(fds[1]), "proxy-peer")
	var conns sync.WaitGroup
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		defer mine.Close()
		for {
			f, tag, err := wire.RecvFDTag(mine)
			if err != nil {
				return // init is gone
			}
			if tag == TagDNS {
				pc, err := net.FilePacketConn(f)
				f.Close()
				if err == nil {
					go px.ServeDNS(pc)
				}
				continue
			}
			var dst netip.AddrPort
			if tag == TagTransparent {
				dst, err = originalDst(f)
			}
			c, cerr := net.FileConn(f)
			f.Close()
			if err != nil || cerr != nil {
				if c != nil {
					c.Close()
				}
				continue
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				if tag == TagTransparent {
					px.ServeTransparent(c, dst)
				} else {
					px.Serve(c)
				}
			}()
		}
	}()
	done := func() {
		<-accepted
		// The sandbox has ended: what the proxy still holds open upstream
		// ends too, and every tunnel's count is final.
		px.Close()
		finished := make(chan struct{})
		go func() { conns.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(time.Second):
		}
		res.egress, res.egressExhausted = px.Events(), px.Exhausted()
		if res.egressExhausted != "" {
			res.egressBudget = b.Value(res.egressExhausted)
		}
		if n := px.Unlisted(); n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d more egress attempts were decided and counted, but only the first %d are listed", n, egress.MaxEvents))
		}
	}
	return peer, done, nil
}

// originalDst is where a redirected connection was going (SO_ORIGINAL_DST).
func originalDst(f *os.File) (netip.AddrPort, error) {
	mreq, err := unix.GetsockoptIPv6Mreq(int(f.Fd()), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	if err != nil {
		return netip.AddrPort{}, err
	}
	// A struct sockaddr_in: family, port (big-endian), address.
	sa := mreq.Multiaddr
	port := uint16(sa[2])<<8 | uint16(sa[3])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{sa[4], sa[5], sa[6], sa[7]}), port), nil
}
