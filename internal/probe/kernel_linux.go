package probe

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// probeUmountMask unmounts the first mask or read-only cover it finds on
// /proc.
func probeUmountMask(*Targets) (Status, string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Error, err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], "/proc/") {
			return refused("umount("+f[4]+")", unix.Unmount(f[4], unix.MNT_DETACH))
		}
	}
	return Error, "no mask mounted on /proc"
}

// probeMountAPI tries the file-descriptor mount calls, with which a process
// holding CAP_SYS_ADMIN in its namespace builds mounts without mount(2).
func probeMountAPI(*Targets) (Status, string) {
	var seen []string
	fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err == nil {
		unix.Close(fd)
		return Escaped, "fsopen(tmpfs) succeeded"
	}
	seen = append(seen, "fsopen: "+errnoOf(err))
	fd, err = unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err == nil {
		unix.Close(fd)
		return Escaped, "open_tree(/, OPEN_TREE_CLONE) succeeded"
	}
	seen = append(seen, "open_tree: "+errnoOf(err))
	return Contained, strings.Join(seen, ", ")
}

// kernelKnobs are files whose writing reaches the whole host: the core dump
// and module loader helpers run as host root, sysrq reboots.
var kernelKnobs = []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches"}

// probeKernelKnobs opens them for writing, and writes nothing.
func probeKernelKnobs(*Targets) (Status, string) {
	var seen []string
	for _, f := range kernelKnobs {
		fd, err := unix.Open(f, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return Escaped, "opened " + f + " for writing"
		}
		seen = append(seen, fmt.Sprintf("%s: %s", f, errnoOf(err)))
	}
	return Contained, strings.Join(seen, ", ")
}

// probeSealedExe checks what the sandbox's executables are: a process that
// reaches a host binary it may write, through /proc/self/exe or /proc/1/exe,
// can overwrite it once nothing runs it (CVE-2019-5736). cordon's own
// program inside is either a sealed memfd or a host file that host root
// owns and nobody else may write.
func probeSealedExe(*Targets) (Status, string) {
	if fd, err := unix.Open("/proc/self/exe", unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
		return Escaped, "opened /proc/self/exe for writing"
	}
	fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Contained, "/proc/self/exe: " + errnoOf(err)
	}
	defer unix.Close(fd)
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err == nil {
		if seals&unix.F_SEAL_WRITE == 0 {
			return Escaped, fmt.Sprintf("the sandbox's executable is a memfd without F_SEAL_WRITE (seals %#x)", seals)
		}
		return Contained, fmt.Sprintf("a sealed memfd (seals %#x), not writable", seals)
	}
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	where := fmt.Sprintf("a file of a host file system (device %d:%d, inode %d, owner %d, mode %#o)", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino, st.Uid, st.Mode&0o7777)
	if int(st.Uid) == os.Geteuid() || unix.Faccessat(unix.AT_FDCWD, "/proc/self/exe", unix.W_OK, unix.AT_EACCESS) == nil {
		return Escaped, "the sandbox runs " + where + " that it owns or may write"
	}
	return Contained, "runs " + where + " that it may not write"
}

// probeNoNewPrivs checks what makes set-user-ID and file-capability
// programs harmless: no_new_privs, and nosuid on every mount.
func probeNoNewPrivs(*Targets) (Status, string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Error, err.Error()
	}
	if !strings.Contains(string(b), "\nNoNewPrivs:\t1\n") {
		return Escaped, "no_new_privs is not set: exec of a set-user-ID program grants its owner's ids"
	}
	m, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Error, err.Error()
	}
	for _, line := range strings.Split(strings.TrimSpace(string(m)), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && !strings.Contains(","+f[5]+",", ",nosuid,") {
			return Escaped, "mounted without nosuid: " + f[4]
		}
	}
	return Contained, "no_new_privs set; every mount nosuid"
}

// probeSyscallSurface calls kernel interfaces the sandbox has no use for
// with arguments the kernel itself rejects with EFAULT: an answer other
// than seccomp's EPERM means the call reached the kernel.
func probeSyscallSurface(*Targets) (Status, string) {
	calls := []struct {
		name string
		nr   uintptr
		args [6]uintptr
		want unix.Errno // what the filter answers
	}{
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{0, 0, ^uintptr(0), ^uintptr(0), 0}, unix.EPERM},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{1, 0}, unix.EPERM},
		// A context would count against the host's fs.aio-max-nr; with no
		// place to put it (NULL), a kernel that saw the call says EFAULT.
		{"io_setup", unix.SYS_IO_SETUP, [6]uintptr{1, 0}, unix.ENOSYS},
	}
	var seen []string
	for _, c := range calls {
		r, _, errno := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		if errno == 0 && c.nr != unix.SYS_IO_SETUP {
			unix.Close(int(r))
		}
		if errno != c.want {
			return Escaped, fmt.Sprintf("%s reached the kernel: %s", c.name, errnoName(errno))
		}
		seen = append(seen, c.name+": "+errnoName(errno))
	}
	return Contained, strings.Join(seen, ", ")
}

func errnoName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return unix.ErrnoName(e)
}

// forbiddenDirect are destinations no sandbox may reach without the proxy:
// the cloud metadata service and a public resolver.
var forbiddenDirect = []string{"169.254.169.254:80", "8.8.8.8:53"}

// probeDirectEgress connects to them directly, ignoring any proxy. Without
// an interface but lo the kernel says at once that there is no route; a
// connection that cordon's transparent capture takes and refuses is closed
// without an answer.
func probeDirectEgress(*Targets) (Status, string) {
	var seen []string
	for _, addr := range forbiddenDirect {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				seen = append(seen, addr+": "+errnoOf(err))
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return Escaped, "a connection attempt to " + addr + " left the sandbox (no answer in 1s)"
			}
			if onlyLoopback() {
				// Captured by cordon (transparent mode) and refused: with
				// no interface but lo, nothing else can have answered.
				seen = append(seen, addr+": "+errnoOf(err)+" (captured; only lo)")
				continue
			}
			return Escaped, addr + " answered: " + errnoOf(err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Close()
		if n > 0 {
			return Escaped, fmt.Sprintf("%s answered %q", addr, buf[:n])
		}
		seen = append(seen, addr+": closed unanswered")
	}
	return Contained, strings.Join(seen, ", ")
}

// onlyLoopback reports whether lo is the sandbox's only interface.
func onlyLoopback() bool {
	ifs, err := net.Interfaces()
	return err == nil && len(ifs) == 1 && ifs[0].Name == "lo"
}
