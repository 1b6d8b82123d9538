package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attack runs one of the programs the host-side probes start in a sandbox
// (`cordon __probe --attack NAME [ARG]`). Each pushes against one limit and
// is bounded by ARG, so that it ends by itself when nothing stops it; it
// prints what it managed as one line starting "attack: ".
func Attack(args []string) int {
	if len(args) == 0 {
		return usageErr("no attack named")
	}
	name, arg := args[0], ""
	if len(args) > 1 {
		arg = args[1]
	}
	n, _ := strconv.ParseInt(arg, 10, 64)
	d, _ := time.ParseDuration(arg)
	switch name {
	case "fork":
		return forkBomb(int(n))
	case "memory":
		return hog(n)
	case "cpu":
		return spin(d)
	case "sleep":
		time.Sleep(d)
		report("slept %s", d)
	case "tmp":
		return fill("/tmp/cordon-probe-fill", n, false)
	case "file":
		return fill("/tmp/cordon-probe-big", n, true)
	case "files":
		return openMany(int(n))
	case "output":
		return flood(n)
	case "daemon":
		return daemons(arg, len(args) > 2 && args[2] == "--stay")
	case "idle":
		idle()
	case "tty":
		return ttyChild(arg)
	case "int80":
		return int80Child()
	case "plant":
		if len(args) < 3 {
			return usageErr("plant VICTIM DIR")
		}
		return plantTraps(args[1], args[2])
	case "protected":
		return protectedAttack()
	case "connect":
		return connectAttack(args[1:])
	case "flood":
		return floodAttack(n)
	case "socks-name":
		return socksNameAttack()
	case "tamper":
		if len(args) < 3 {
			return usageErr("tamper PROFILE RECORD")
		}
		return tamperAttack(args[1], args[2])
	case "init-signals":
		return initSignals()
	case "inotify":
		return inotifyHold(int(n))
	default:
		return usageErr("unknown attack " + name)
	}
	return 0
}

func usageErr(msg string) int {
	fmt.Fprintln(os.Stderr, "probe:", msg)
	return 2
}

// report prints the attack's result line.
func report(format string, args ...any) {
	fmt.Printf("attack: "+format+"\n", args...)
}

// idle blocks until killed.
func idle() {
	for {
		time.Sleep(time.Hour)
	}
}

// forkBomb starts up to n idle processes, retrying failures for a while: a
// fork bomb that does not give up.
func forkBomb(n int) int {
	started, failures := 0, 0
	var last error
	begin := time.Now()
	var firstFailure time.Time
	for started < n {
		if failures > 0 && time.Since(firstFailure) > forkRetry {
			report("started %d processes; %d forks failed (last: %v)", started, failures, last)
			return 0
		}
		if failures == 0 && time.Since(begin) > forkWall {
			// Neither stopped nor at its bound: the host was too slow to
			// tell (each child is a Go program starting).
			report("started %d processes; out of time after %s", started, forkWall)
			return 0
		}
		_, err := syscall.ForkExec("/proc/self/exe", []string{"cordon", ProbeArg, "--attack", "idle"}, &syscall.ProcAttr{})
		if err != nil {
			if failures == 0 {
				firstFailure = time.Now()
			}
			failures++
			last = err
			time.Sleep(10 * time.Millisecond)
			continue
		}
		started++
	}
	if failures > 0 {
		report("started %d processes; %d forks failed (last: %v)", started, failures, last)
	} else {
		report("started %d processes", started)
	}
	return 0
}

// forkRetry is how long forkBomb retries once a fork failed; forkWall
// bounds it when none does, below the wall limit of the probes' runs: on a
// slow host (an emulated machine) a child takes a good part of a second to
// start.
const (
	forkRetry = 5 * time.Second
	forkWall  = 20 * time.Second
)

// hog allocates and touches n bytes, a MiB at a time.
// hog takes n bytes of shared anonymous memory, which only a cgroup counts
// (RLIMIT_DATA, the per-process fallback, counts private memory only).
func hog(n int64) int {
	var keep [][]byte
	var got int64
	for got < n {
		b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			report("allocated %d bytes, then %v", got, err)
			return 1
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		got += int64(len(b))
	}
	report("allocated %d bytes", got)
	runtime.KeepAlive(keep) // held to the end: the memory stays in use
	return 0
}

// spinWall is how long spin may take to burn its CPU time on a busy host,
// below the wall limit of the probes' runs.
const spinWall = 25 * time.Second

// spin burns d of CPU time, measured on the spinning thread itself: on a
// host busy enough that the thread gets a small share of a CPU, burning for
// d of wall-clock time would use less than the limit it tests.
func spin(d time.Duration) int {
	runtime.LockOSThread()
	start := time.Now()
	x := 0
	var used time.Duration
	for used < d {
		if time.Since(start) > spinWall {
			report("failed to get %s of CPU in %s (got %s)", d, spinWall, used.Round(time.Millisecond))
			return 0
		}
		for i := 0; i < 1000000; i++ {
			x += i
		}
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		used = time.Duration(ts.Nano())
	}
	runtime.KeepAlive(x)
	report("spun for %s of CPU", d)
	return 0
}

// fill writes up to n bytes to path. With killable, SIGXFSZ gets its
// default action (Go ignores it), as for most programs.
func fill(path string, n int64, killable bool) int {
	if killable {
		var act [4]uintptr // struct sigaction, all zero: SIG_DFL
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGXFSZ), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		report("open %s: %s", path, errnoOf(err))
		return 0
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var wrote int64
	for wrote < n {
		m, err := f.Write(chunk)
		wrote += int64(m)
		if err != nil {
			report("wrote %d bytes, then %s", wrote, errnoOf(err))
			return 0
		}
	}
	report("wrote %d bytes", wrote)
	return 0
}

// openMany opens /dev/null up to n times.
func openMany(n int) int {
	for i := 0; i < n; i++ {
		if _, err := unix.Open("/dev/null", unix.O_RDONLY, 0); err != nil {
			report("opened %d files, then %s", i, errnoOf(err))
			return 0
		}
	}
	report("opened %d files", n)
	return 0
}

// flood writes n bytes to stdout.
func flood(n int64) int {
	line := make([]byte, 4096)
	for i := range line {
		line[i] = 'x'
	}
	line[len(line)-1] = '\n'
	for wrote := int64(0); wrote < n; wrote += int64(len(line)) {
		if _, err := os.Stdout.Write(line); err != nil {
			return 1
		}
	}
	return 0
}

// daemons starts two processes that leave the session and carry marker in
// their arguments, as a program that wants to outlive its sandbox would.
// With stay, it then waits to be killed.
func daemons(marker string, stay bool) int {
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		os.WriteFile(filepath.Join(dir, marker), []byte("left behind?\n"), 0o644)
	}
	for i := 0; i < 2; i++ {
		_, err := syscall.ForkExec("/proc/self/exe", []string{"cordon", ProbeArg, "--attack", "idle", marker}, &syscall.ProcAttr{
			Sys: &syscall.SysProcAttr{Setsid: true},
		})
		if err != nil {
			report("starting a daemon: %v", err)
			return 1
		}
	}
	signalIgnore(unix.SIGHUP, unix.SIGTERM)
	report("ready")
	if stay {
		idle()
	}
	return 0
}

func signalIgnore(sigs ...unix.Signal) {
	for _, s := range sigs {
		act := [4]uintptr{1} // SIG_IGN
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(s), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
}

// ttyChild runs on a pseudo-terminal that is its controlling terminal
// (fd 0) and tries op on it, printing the errno or "ok".
func ttyChild(op string) int {
	var err error
	switch op {
	case "tiocsti", "tiocsti-high":
		req := uintptr(unix.TIOCSTI)
		if op == "tiocsti-high" {
			req |= 1 << 32
		}
		c := byte('#')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, req, uintptr(unsafe.Pointer(&c)))
		if errno != 0 {
			err = errno
		}
	case "tioclinux":
		sub := byte(6) // TIOCL_GETSHIFTSTATE: reads, changes nothing
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
		if errno != 0 {
			err = errno
		}
	default:
		return usageErr("unknown tty attack " + op)
	}
	if err != nil {
		var errno unix.Errno
		errors.As(err, &errno)
		report("%s", unix.ErrnoName(errno))
		return 0
	}
	report("ok")
	return 0
}
