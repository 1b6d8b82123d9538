// Package nsinit is the sandbox side of cordon: PID 1 of the sandbox's PID
// namespace. It reads the Spec, builds the root file system and pivots into
// it, confines itself (capabilities, no_new_privs, Landlock, seccomp), starts
// the command, reaps every process, forwards signals, and reports how the
// command ended. Everything it does before the command starts happens before
// any code of the sandbox runs.
package nsinit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/idlemem"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// In a process started as init, the main goroutine stays on the process's
// main thread, where package initialization runs: init's work is done
// there, so that its name is the process's name and the thread that forks
// the command is the one confine empties the capability sets of. Locking
// later, in Main, could find the goroutine already moved to another thread.
func init() {
	if len(os.Args) > 1 && os.Args[1] == wire.InitArg {
		runtime.LockOSThread()
	}
}

// Main runs the init and never returns. It is reached through the hidden
// subcommand wire.InitArg of the cordon binary.
func Main() {
	// The command is forked from this thread, which holds the emptied
	// bounding and ambient capability sets (see confine).
	runtime.LockOSThread()
	status := os.NewFile(wire.StatusFD, "status")
	report := func(s wire.Status) {
		status.Write(append(s.AppendJSON(nil), '\n'))
	}
	if err := run(status, report); err != nil {
		var se *stageError
		if errors.As(err, &se) {
			report(wire.Status{Event: "error", Stage: se.stage, Error: se.err.Error()})
		} else {
			report(wire.Status{Event: "error", Error: err.Error()})
		}
		os.Exit(1)
	}
	os.Exit(0)
}

type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }

func stage(name string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{name, err}
}

func run(status *os.File, report func(wire.Status)) error {
	if unix.Gettid() != unix.Getpid() {
		return stage("starting", errors.New("init is not on the process's main thread"))
	}
	specFile := os.NewFile(wire.SpecFD, "spec")
	spec, rest, err := wire.ReadSpec(specFile)
	if err != nil {
		return stage("reading spec", err)
	}
	// Nothing inherited beyond the descriptors cordon passes may reach the
	// command: mark all of them close-on-exec.
	if !spec.Weaken.FDs { // test builds only
		if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
			return stage("closing inherited descriptors", err)
		}
	}
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("cordon-init\x00")[0])), 0, 0, 0)
	// Non-dumpable: the sandbox cannot ptrace, read the memory of or open
	// /proc/1/exe of its init.
	if !spec.Weaken.Dumpable { // test builds only
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return stage("prctl dumpable", err)
		}
	}

	if !spec.Weaken.UTSNS { // test builds only: the host's UTS namespace is not ours to name
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return stage("setting hostname", err)
		}
	}
	// Bringing up lo, and registering the signals init forwards to the
	// command (each a round trip to the Go runtime's signal thread), run
	// while the root is built; both end before the proxy's listener needs
	// lo, and before confinement, which then covers every thread they
	// started.
	loErr := make(chan error, 1)
	sigs := make(chan os.Signal, 16)
	go func() {
		var err error
		if !spec.Weaken.NetNS {
			err = loopbackUp()
		}
		// Registered before the command starts so that none is lost.
		signal.Notify(sigs, forwarded...)
		loErr <- err
	}()
	rfs := &rootfs{spec: spec}
	if err := rfs.build(); err != nil {
		return stage("building root", err)
	}
	if err := os.Chdir(spec.Workdir); err != nil {
		return stage("entering working directory", err)
	}
	if err := <-loErr; err != nil {
		return stage("bringing up lo", err)
	}
	if spec.ProxyAddr != "" {
		sock := os.NewFile(wire.ProxyFD, "proxy")
		if err := relayProxy(spec.ProxyAddr, sock); err != nil {
			return stage("listening for the egress proxy", err)
		}
		if spec.Transparent {
			if err := transparent(spec, sock); err != nil {
				return stage("transparent egress", err)
			}
		}
	}
	stdio := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	if spec.TTY && !spec.Serve {
		peer, err := openConsole()
		if err != nil {
			return stage("allocating the terminal", err)
		}
		stdio = []*os.File{peer, peer, peer}
	}
	abi, err := confine(spec)
	if err != nil {
		return stage("confining", err)
	}

	// cordon says when init is in the sandbox's cgroups: the command starts
	// within its limits, or not at all (a pipe closed without the word is
	// cordon gone).
	placed, err := io.ReadAll(rest)
	specFile.Close()
	if err != nil || strings.TrimSpace(string(placed)) != strings.TrimSpace(wire.Placed) {
		return stage("waiting to be placed in the cgroup", fmt.Errorf("cordon did not confirm (%q, %v)", placed, err))
	}

	// The command may signal init from its first instruction on.
	if !spec.Weaken.InitSignals { // test builds only: init dies of them
		if err := ignoreSignals(forwarded); err != nil {
			return stage("ignoring signals", err)
		}
	}

	if spec.Serve {
		if !spec.Weaken.InitSignals {
			if err := detachStdio(); err != nil {
				return stage("detaching from the output", err)
			}
		}
		report(wire.Status{Event: "ready", LandlockABI: abi, Note: strings.Join(rfs.notes, "; ")})
		status.Close()
		return serve(spec)
	}
	pid, err := startCommand(spec, stdio)
	if err != nil {
		code := 127
		if !errors.Is(err, os.ErrNotExist) {
			code = 126
		}
		report(wire.Status{Event: "exec-error", Error: err.Error(), Code: code})
		return nil
	}
	if !spec.Weaken.InitSignals {
		if err := detachStdio(); err != nil {
			unix.Kill(-1, unix.SIGKILL)
			return stage("detaching from the output", err)
		}
	}
	report(wire.Status{Event: "started", Pid: pid, LandlockABI: abi, Note: strings.Join(rfs.notes, "; ")})

	// A command that runs on leaves init waiting: the pages of its
	// program that its start mapped go back then. Its heap has not been
	// collected yet, and a collection would cost more than it returns.
	// Not where RLIMIT_NPROC bounds the sandbox's tasks: init's are
	// counted with the command's, and work done while the command holds
	// all of them could have the Go runtime start a thread the kernel
	// refuses, of which init would die.
	if spec.Rlimits.Processes == 0 {
		idle := time.AfterFunc(idleAfter, idlemem.Program)
		defer idle.Stop()
	}
	ws, other := supervise(pid, sigs)
	st := wire.Status{Event: "exit", TmpUsed: tmpUsed(spec), OtherSignal: other}
	if ws.Signaled() {
		st.Signal = int(ws.Signal())
	} else {
		st.Code = ws.ExitStatus()
	}
	report(st)
	return nil
}

// idleAfter is how long a command runs before init, waiting on it,
// returns the memory it no longer uses.
const idleAfter = time.Second

// forwarded are the signals init passes on to the command.
var forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT}

// startCommand starts the command: its program is looked up in the
// sandbox's PATH, and it starts in a new session with only descriptors 0-2.
// It is forked with syscall.ForkExec rather than os/exec, whose first use
// forks an extra child to probe for pidfd support.
func startCommand(spec *wire.Spec, stdio []*os.File) (int, error) {
	if len(spec.Args) == 0 {
		return 0, fmt.Errorf("no command")
	}
	prog := fmt.Sprintf("/proc/self/fd/%d", wire.SelfFD) // the sealed copy of cordon
	if !spec.SelfExec {
		var err error
		if prog, err = lookPath(spec.Args[0], spec.Path); err != nil {
			return 0, err
		}
	}
	pid, err := syscall.ForkExec(prog, spec.Args, &syscall.ProcAttr{
		Dir:   spec.Workdir,
		Env:   spec.Env,
		Files: []uintptr{stdio[0].Fd(), stdio[1].Fd(), stdio[2].Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: spec.TTY, Ctty: 0},
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) && !spec.SelfExec {
			// The program is there (lookPath found it): what is not is
			// the interpreter it asks for. Relative, it is found from
			// where the command starts, as ForkExec found it.
			at := prog
			if !filepath.IsAbs(at) {
				at = filepath.Join(spec.Workdir, at)
			}
			if why := interpreterMissing(at); why != "" {
				return 0, fmt.Errorf("%s: %w: %s", prog, err, why)
			}
		}
		return 0, fmt.Errorf("%s: %w", prog, err)
	}
	return pid, nil
}

// lookPath finds name in the sandbox's PATH, as a shell would.
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return name, nil
	}
	var firstErr error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		err := executable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, os.ErrNotExist) {
			firstErr = fmt.Errorf("%s: %w", p, err)
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("%s: command not found: %w", name, os.ErrNotExist)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("is a directory: %w", os.ErrPermission)
	}
	return unix.Access(p, unix.X_OK)
}

// supervise forwards signals to the command's process group and reaps every
// process in the sandbox. When the command exits, the rest of the sandbox is
// killed: nothing outlives the call. It returns the command's status.
//
// Signals are sent from the calling goroutine, locked to the thread the
// command was forked from: with Landlock before ABI 8 each thread of init is
// its own Landlock domain, and signals only reach processes of the sender's
// domain.
func supervise(pid int, sigs <-chan os.Signal) (unix.WaitStatus, int) {
	exited := make(chan unix.WaitStatus, 1)
	empty := make(chan struct{})
	var other atomic.Int32 // a limit's signal that killed an orphan
	go func() {
		for {
			var ws unix.WaitStatus
			p, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil { // ECHILD: nothing left
				close(empty)
				return
			}
			if p == pid {
				exited <- ws
			} else if ws.Signaled() && (ws.Signal() == unix.SIGXFSZ || ws.Signal() == unix.SIGXCPU) {
				other.CompareAndSwap(0, int32(ws.Signal()))
			}
		}
	}()
	var status unix.WaitStatus
	for {
		select {
		case s := <-sigs:
			unix.Kill(-pid, s.(syscall.Signal))
		case status = <-exited:
			unix.Kill(-1, unix.SIGKILL)
		case <-empty:
			select { // the command's status, if not taken yet
			case status = <-exited:
			default:
			}
			return status, int(other.Load())
		}
	}
}

// loopbackUp brings up lo, the only interface of the sandbox's network
// namespace, so that programs can talk to themselves over 127.0.0.1.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// openConsole allocates a pseudo-terminal in the sandbox's devpts, sends its
// master to the host side, and waits until the host side has sized it.
func openConsole() (*os.File, error) {
	sock := os.NewFile(wire.ConsoleFD, "console")
	defer sock.Close()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return nil, fmt.Errorf("unlocking: %w", err)
	}
	pfd, _, errno := unix.Syscall(unix.SYS_IOCTL, master.Fd(), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return nil, fmt.Errorf("opening peer: %w", errno)
	}
	peer := os.NewFile(pfd, "tty")
	if err := wire.SendFD(sock, master); err != nil {
		peer.Close()
		return nil, fmt.Errorf("sending master: %w", err)
	}
	if _, err := sock.Read(make([]byte, 1)); err != nil {
		peer.Close()
		return nil, fmt.Errorf("waiting for the host side: %w", err)
	}
	return peer, nil
}

// tmpUsed returns the most bytes in use in any size-capped file system.
func tmpUsed(spec *wire.Spec) int64 {
	var most int64
	for _, dir := range []string{"/tmp", "/dev/shm", spec.Home} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil {
			if used := int64(st.Blocks-st.Bfree) * int64(st.Bsize); used > most {
				most = used
			}
		}
	}
	return most
}

// relayProxy listens on addr inside the sandbox and hands every connection,
// as a descriptor, to cordon's proxy outside: the only way out of the
// sandbox's network namespace. The listener and the socket to cordon are
// close-on-exec: the command cannot use the socket itself.
func relayProxy(addr string, sock *os.File) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go relay(ln, sock, tagProxy)
	return nil
}
