package probe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// initProbes are the host-side probes of what the sandbox can do to the
// host's own machinery without leaving the sandbox: kill the sandbox's
// init (cordon's, which reports how the command ended), and use up the
// quotas the kernel keeps for the host's users.
var initProbes = []HostProbe{
	{"host-init-signals", "host", "send the sandbox's init (PID 1) every signal, with kill(2) and with rt_sigqueueinfo(2) as if it were a fault",
		"init outlives them all; the run ends ok", probeInitSignals},
	{"host-inotify-quota", "host", "create inotify instances until refused, to leave none to the host's user running cordon",
		"the sandbox is refused at its share; the host's user still creates one", probeInotifyQuota},
}

// probeInitSignals runs the init-signals attack under a cordon process of
// its own: if init dies, the run is cordon's failure, which a run in this
// process would take for the probes' own.
func probeInitSignals(r Runner, base *profile.Profile) (Status, string) {
	p := base.Clone()
	p.SetLimit("wall", probeWall.String())
	pr, pw, err := os.Pipe()
	if err != nil {
		return Error, err.Error()
	}
	defer pr.Close()
	cmd, err := r.Start(p, []string{"init-signals"}, pw)
	pw.Close()
	if err != nil {
		return Error, err.Error()
	}
	last := lastAttackLine(pr)
	cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	switch {
	case strings.HasPrefix(last, "init outlived") && code == 0:
		return Contained, last + "; the run ended ok"
	case strings.HasPrefix(last, "sending ") && code == outcome.ExitSandboxError:
		return Escaped, fmt.Sprintf("init died of the signals the sandbox sent it (the last sent: %s), and the run was reported as cordon's failure (exit %d)",
			strings.TrimPrefix(last, "sending "), code)
	}
	return Error, fmt.Sprintf("the attack said %q; cordon exited with %d", last, code)
}

// lastAttackLine reads r to its end and returns the last result line.
func lastAttackLine(r io.Reader) string {
	last := "nothing"
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "attack: "); ok {
			last = s
		}
	}
	return last
}

// probeInotifyQuota lets the sandbox create inotify instances until the
// kernel refuses, and then, while the sandbox holds them, has this process
// (the user running cordon: host root, or the rootless user) create one.
// Each is charged up the user namespaces to the owner of the sandbox's.
func probeInotifyQuota(r Runner, base *profile.Profile) (Status, string) {
	limit, err := hostInotifyLimit()
	if err != nil {
		return Error, err.Error()
	}
	if err := newInotify(); err != nil {
		return Error, "cordon's user cannot create an inotify instance even before the sandbox runs: " + errnoOf(err)
	}
	p := base.Clone()
	p.SetLimit("wall", probeWall.String())
	// Room for more descriptors than the host's limit: what refuses the
	// sandbox must be the quota, not its open_files.
	if err := raiseTo(p, "open_files", strconv.Itoa(limit+64)); err != nil {
		return Error, err.Error()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return Error, err.Error()
	}
	defer pr.Close()
	cmd, err := r.Start(p, []string{"inotify", strconv.Itoa(limit + 16)}, pw)
	pw.Close()
	if err != nil {
		return Error, err.Error()
	}
	end := func() {
		cmd.Process.Signal(unix.SIGTERM) // cordon passes it on to the attack
		io.Copy(io.Discard, pr)
		cmd.Wait()
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "attack: "); ok {
				lines <- s
				return
			}
		}
		lines <- ""
	}()
	var made string
	select {
	case made = <-lines:
	case <-time.After(20 * time.Second):
	}
	if made == "" {
		end()
		return Error, "the attack did not say what it made"
	}
	during := newInotify()
	end()
	uid := os.Geteuid()
	switch {
	case during == nil:
		return Contained, fmt.Sprintf("the sandbox %s; cordon's user (uid %d) still created one", made, uid)
	case errors.Is(during, unix.EMFILE):
		return Escaped, fmt.Sprintf("the sandbox %s; while it held them, cordon's user (uid %d) could create none: EMFILE", made, uid)
	}
	return Error, fmt.Sprintf("the sandbox %s; cordon's user failed otherwise: %s", made, errnoOf(during))
}

// hostInotifyLimit is the host's per-user limit on inotify instances.
func hostInotifyLimit() (int, error) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// newInotify creates an inotify instance and closes it.
func newInotify() error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// initSignals sends init every signal from 1 to 64, first with kill(2),
// then with rt_sigqueueinfo(2) and si_code SI_QUEUE, which the Go runtime
// takes for a fault of the receiver's own when the signal is SIGSEGV,
// SIGBUS or SIGFPE. It says which signal it sends before sending it: if
// init dies, the sandbox dies with it, and that line is the last.
func initSignals() int {
	// Those init forwards come back to this process: they must not end it.
	signalIgnore(unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGUSR1, unix.SIGUSR2)
	sent := 0
	for _, how := range []string{"kill", "rt_sigqueueinfo"} {
		for sig := unix.Signal(1); sig <= 64; sig++ {
			name := unix.SignalName(sig)
			if name == "" {
				name = "signal " + strconv.Itoa(int(sig))
			}
			report("sending %s with %s", name, how)
			var err error
			if how == "kill" {
				err = unix.Kill(1, sig)
			} else {
				err = sigqueue(1, sig)
			}
			if err != nil {
				report("%s of %s to init: %s", how, name, errnoOf(err))
				return 0
			}
			sent++
			// A dying init takes the sandbox with it within this pause.
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	report("init outlived %d signals, each sent with kill and with rt_sigqueueinfo", sent/2)
	return 0
}

// sigqueue sends sig to pid with rt_sigqueueinfo(2), as sigqueue(3) does.
func sigqueue(pid int, sig unix.Signal) error {
	const siQueue = -1
	info := unix.Siginfo{Signo: int32(sig), Code: siQueue}
	_, _, errno := unix.RawSyscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(sig), uintptr(unsafe.Pointer(&info)))
	if errno != 0 {
		return errno
	}
	return nil
}

// inotifyHold creates up to n inotify instances, says how many, and keeps
// them until it is killed.
func inotifyHold(n int) int {
	made := 0
	var err error
	for made < n {
		if _, err = unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
			break
		}
		made++
	}
	if err != nil {
		report("made %d inotify instances, then %s", made, errnoOf(err))
	} else {
		report("made %d inotify instances", made)
	}
	idle()
	return 0
}
