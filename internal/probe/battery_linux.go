package probe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// inherited lists the descriptors above 2 open when the probe started,
// before the probes opened any (read only in a probe process, so that
// other runs of cordon do not pay for it).
var inherited = func() []string {
	if len(os.Args) > 1 && os.Args[1] == ProbeArg {
		return openFDs()
	}
	return nil
}()

// Battery is every probe, grouped by category in the order of THREATS.md.
func Battery() []Probe {
	all := []Probe{
		{"fs-canary-file", "filesystem", "read a host file outside the profile's view (a canary planted by cordon)",
			"absent or permission denied", probeCanaryFile},
		{"fs-shadow", "filesystem", "read /etc/shadow", "absent or permission denied", probeReadFile("/etc/shadow")},
		{"fs-write-system", "filesystem", "create a file in /usr/bin", "read-only or permission denied", probeCreate("/usr/bin/cordon-probe")},
		{"fs-refer", "filesystem", "move or hard-link a read-only file (/etc/hosts, a program in /usr/bin) into a writable directory or elsewhere on its own file system, to change it there",
			"refused (EXDEV, EROFS or EACCES)", probeRefer},
		{"fs-remount-root", "filesystem", "remount the root read-write", "refused", probeRemount},
		{"fs-mount", "filesystem", "mount a tmpfs", "refused", probeMount},
		{"fs-chroot", "filesystem", "chroot(2)", "refused", probeChroot},
		{"fs-sysfs", "filesystem", "read the host's devices and firmware under /sys", "no /sys", probeSysfs},
		{"fs-cgroupfs", "filesystem", "find a cgroup file system to write (release_agent, moving to a parent cgroup)", "none mounted", probeCgroupfs},
		{"fs-inherited-fds", "filesystem", "use a descriptor inherited from outside the sandbox (beyond 0-2)", "none", probeFDs},
		{"fs-proc-secrets", "filesystem", "read /proc/kallsyms, /proc/keys and /proc/timer_list", "masked (empty) or absent", probeProcMasked},
		{"fs-umount-mask", "filesystem", "unmount a mask on /proc to uncover what is below", "refused", probeUmountMask},
		{"fs-mount-api", "filesystem", "build a mount with fsopen(2) or open_tree(2)", "refused", probeMountAPI},
		{"fs-kernel-knobs", "filesystem", "open core_pattern, modprobe, sysrq-trigger or drop_caches for writing", "refused", probeKernelKnobs},
		{"fs-sealed-exe", "filesystem", "reach a host binary through /proc/self/exe to overwrite it (CVE-2019-5736)", "a sealed copy, not writable", probeSealedExe},
		{"ns-nested-userns", "namespaces", "create a nested user namespace with unshare(2)", "refused", probeUnshare},
		{"ns-clone3", "namespaces", "reach clone3(2), whose flags seccomp cannot inspect", "ENOSYS", probeClone3},
		{"ns-setns", "namespaces", "join a namespace with setns(2)", "refused", probeSetns},
		{"ns-personality", "namespaces", "set READ_IMPLIES_EXEC with personality(2)", "refused", probePersonality},
		{"ns-capabilities", "namespaces", "hold any capability (effective, permitted, bounding, ambient)", "all sets empty", probeCaps},
		{"ns-no-new-privs", "namespaces", "gain privileges by running a set-user-ID or file-capability program", "no_new_privs set, every mount nosuid", probeNoNewPrivs},
		{"ns-syscall-surface", "namespaces", "reach perf_event_open(2), io_uring_setup(2) and io_setup(2)", "EPERM (ENOSYS for io_setup) from the filter", probeSyscallSurface},
		{"proc-sysv-ipc", "processes", "attach the host's System V shared memory (a canary segment)", "not found", probeSysV},
		{"proc-hostname", "processes", "see or set the host's name", "a name of the sandbox's own, not settable", probeHostname},
		{"proc-init-memory", "processes", "read the environment and memory of the sandbox's init", "refused", probeInit},
		{"proc-ptrace", "processes", "ptrace a process of the sandbox", "refused", probePtrace},
		{"proc-keyring", "processes", "add a key to the kernel keyring", "refused", probeKeyring},
		{"proc-userfaultfd", "processes", "create a userfaultfd", "refused", probeUserfaultfd},
		{"proc-tiocsti", "processes", "push input into the controlling terminal with TIOCSTI, also with the high bits set (CVE-2017-5226, CVE-2019-10063)",
			"EPERM", probeTTY("tiocsti", "tiocsti-high")},
		{"proc-tioclinux", "processes", "use TIOCLINUX on the controlling terminal", "EPERM", probeTTY("tioclinux")},
		{"net-host-loopback", "network", "connect to a service on the host's loopback", "no route", probeLoopback},
		{"net-interfaces", "network", "find a network interface other than lo", "only lo", probeInterfaces},
		{"net-abstract-socket", "network", "connect to a unix socket in the host's abstract namespace (a canary)", "refused", probeAbstract},
		{"net-host-udp", "network", "exchange UDP with a service on the host's loopback", "no answer", probeUDP},
		{"net-packet-socket", "network", "open an AF_PACKET socket (raw frames, below the proxy)", "refused", probePacketSocket},
		{"net-vsock", "network", "open an AF_VSOCK socket (to the hypervisor's host, which no network namespace separates)", "refused", probeVsock},
		{"net-direct-egress", "network", "connect, without the proxy, to the metadata service and a public resolver", "no route", probeDirectEgress},
		{"agent-host-sockets", "agent", "find docker.sock, an SSH agent or a D-Bus socket", "none present", probeSockets},
		{"agent-secret-files", "agent", "find SSH keys, cloud credentials or tokens in common places", "none present", probeSecretFiles},
		{"agent-env-canary", "agent", "find a secret from cordon's own environment in the environment or /proc/*/environ",
			"not found", probeEnvCanary},
	}
	// The foreign-architecture probe goes after the other namespace probes.
	at := 0
	for i, p := range all {
		if p.Category == "namespaces" {
			at = i + 1
		}
	}
	return append(all[:at:at], append(foreignArch, all[at:]...)...)
}

func errnoOf(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func probeCanaryFile(t *Targets) (Status, string) {
	if t.CanaryFile == "" {
		return Error, "no canary file planted"
	}
	return probeReadFile(t.CanaryFile)(t)
}

// probeReadFile tries to read path: contained when it is absent or refused.
func probeReadFile(path string) func(*Targets) (Status, string) {
	return func(*Targets) (Status, string) {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			return Escaped, fmt.Sprintf("read %d bytes of %s", len(b), path)
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return Contained, fmt.Sprintf("%s: %s", path, errnoOf(err))
		}
		return Error, err.Error()
	}
}

// probeCreate tries to create path: contained when refused.
func probeCreate(path string) func(*Targets) (Status, string) {
	return func(*Targets) (Status, string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		switch {
		case err == nil:
			f.Close()
			os.Remove(path)
			return Escaped, "created " + path
		case errors.Is(err, unix.EROFS), errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return Contained, fmt.Sprintf("%s: %s", path, errnoOf(err))
		}
		return Error, err.Error()
	}
}

// probeRefer tries to give a read-only file a name in a place where it
// could be written: renames and links across directories are what Landlock's
// REFER right governs. Every read-only, protected and scratch part of the
// view is a mount of its own, and the kernel refuses a link or rename
// between mounts (EXDEV) before Landlock is asked; Landlock refuses it too
// where a file would gain rights. The probe fails only when both go: a
// writable root with REFER beneath it (host-protected-paths tries the same
// against the protected paths of the workspace).
func probeRefer(*Targets) (Status, string) {
	srcs := []string{"/etc/hosts"}
	if bins, _ := filepath.Glob("/usr/bin/*"); len(bins) > 0 {
		for _, b := range bins {
			if fi, err := os.Lstat(b); err == nil && fi.Mode().IsRegular() {
				srcs = append(srcs, b)
				break
			}
		}
	}
	dirs := []string{"/", "/tmp", "/dev/shm"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, home)
	}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	var refused []string
	for _, src := range srcs {
		for _, dir := range dirs {
			dst := filepath.Join(dir, ".cordon-probe-refer")
			for _, op := range []string{"link", "rename"} {
				var err error
				if op == "link" {
					err = os.Link(src, dst)
				} else {
					err = os.Rename(src, dst)
				}
				switch {
				case err == nil:
					if op == "rename" {
						os.Rename(dst, src)
					} else {
						os.Remove(dst)
					}
					return Escaped, fmt.Sprintf("%s(%s, %s) succeeded", op, src, dst)
				case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EROFS), errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
					refused = append(refused, errnoOf(err))
				default:
					return Error, err.Error()
				}
			}
		}
	}
	slices.Sort(refused)
	return Contained, fmt.Sprintf("%d attempts from %s: %s", len(refused), strings.Join(srcs, ", "), strings.Join(slices.Compact(refused), ", "))
}

func probeUnshare(*Targets) (Status, string) {
	// unshare(2) on a multithreaded process refuses CLONE_NEWUSER with
	// EINVAL whatever the sandbox does; the probe asks from a fresh child.
	err := unshareInChild()
	switch {
	case err == nil:
		return Escaped, "created a user namespace"
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.ENOSYS):
		return Contained, "unshare(CLONE_NEWUSER): " + errnoOf(err)
	}
	return Error, err.Error()
}

func probeCaps(*Targets) (Status, string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Error, err.Error()
	}
	var held []string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.HasPrefix(k, "Cap") && strings.Trim(strings.TrimSpace(v), "0") != "" {
			held = append(held, k+"="+strings.TrimSpace(v))
		}
	}
	if len(held) > 0 {
		return Escaped, strings.Join(held, " ")
	}
	return Contained, "CapInh CapPrm CapEff CapBnd CapAmb all 0"
}

func probeLoopback(t *Targets) (Status, string) {
	if t.LoopbackAddr == "" {
		return Error, "no loopback service planted"
	}
	c, err := net.DialTimeout("tcp", t.LoopbackAddr, 2*time.Second)
	if err != nil {
		return Contained, fmt.Sprintf("%s: %s", t.LoopbackAddr, errnoOf(err))
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if strings.HasPrefix(string(buf[:n]), "cordon-canary") {
		return Escaped, "reached the host's service at " + t.LoopbackAddr
	}
	// Something in the sandbox's own namespace answered: not the host.
	return Contained, fmt.Sprintf("%s answered %q, not the host's service", t.LoopbackAddr, trim(string(buf[:n]), 20))
}

func probeInterfaces(*Targets) (Status, string) {
	ifs, err := net.Interfaces()
	if err != nil {
		return Error, err.Error()
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	if onlyLoopback() {
		return Contained, "only lo"
	}
	return Escaped, "interfaces: " + strings.Join(names, " ")
}

func probeEnvCanary(t *Targets) (Status, string) {
	if t.CanaryEnvSHA256 == "" {
		return Error, "no canary variable planted"
	}
	found := func(text string) bool {
		for _, kv := range strings.Split(text, "\x00") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				sum := sha256.Sum256([]byte(v))
				if hex.EncodeToString(sum[:]) == t.CanaryEnvSHA256 {
					return true
				}
			}
		}
		return false
	}
	if found(strings.Join(os.Environ(), "\x00")) {
		return Escaped, "the canary is in the probe's environment"
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && found(string(b)) {
			return Escaped, "the canary is in " + p
		}
	}
	return Contained, fmt.Sprintf("not in the environment nor in %d /proc/*/environ", len(paths))
}

// unshareInChild starts a child in a new user namespace, through clone(2)
// as any program would, and reports what the kernel (or seccomp) said.
func unshareInChild() error {
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"cordon", "__hold"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER},
	})
	if err != nil {
		return err
	}
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, 0, nil)
	return nil
}

func probeProcMasked(*Targets) (Status, string) {
	var leaked []string
	for _, f := range []string{"/proc/kallsyms", "/proc/keys", "/proc/timer_list"} {
		b, err := os.ReadFile(f)
		if err == nil && len(b) > 0 {
			leaked = append(leaked, fmt.Sprintf("%s (%d bytes)", f, len(b)))
		}
	}
	if len(leaked) > 0 {
		return Escaped, "read " + strings.Join(leaked, ", ")
	}
	return Contained, "empty or absent"
}

func probePacketSocket(*Targets) (Status, string) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0x0300) // htons(ETH_P_ALL)
	if err == nil {
		unix.Close(fd)
		return Escaped, "opened an AF_PACKET socket"
	}
	return Contained, "socket(AF_PACKET): " + errnoOf(err)
}

func probeVsock(*Targets) (Status, string) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.Close(fd)
		return Escaped, "opened an AF_VSOCK socket"
	}
	return Contained, "socket(AF_VSOCK): " + errnoOf(err)
}

// hostSockets are places where a host's privileged sockets live.
var hostSockets = []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket"}

func probeSockets(*Targets) (Status, string) {
	candidates := append([]string{}, hostSockets...)
	if s := os.Getenv("SSH_AUTH_SOCK"); s != "" {
		candidates = append(candidates, s)
	}
	more, _ := filepath.Glob("/run/user/*/bus")
	candidates = append(candidates, more...)
	more, _ = filepath.Glob("/tmp/ssh-*/agent.*")
	candidates = append(candidates, more...)
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return Escaped, "found " + c
		}
	}
	return Contained, fmt.Sprintf("none of %d places holds a socket", len(candidates))
}

// secretPatterns are where credentials usually are.
var secretPatterns = []string{"/root/.ssh/*", "/home/*/.ssh/id_*", "/root/.aws/credentials", "/home/*/.aws/credentials",
	"/root/.config/gcloud/*", "/home/*/.config/gcloud/*", "/root/.kube/config", "/home/*/.kube/config",
	"/root/.docker/config.json", "/home/*/.docker/config.json", "/root/.netrc", "/home/*/.netrc",
	"/etc/ssh/ssh_host_*_key", "/run/secrets/*", "/var/run/secrets/kubernetes.io/serviceaccount/token"}

func probeSecretFiles(*Targets) (Status, string) {
	for _, pat := range secretPatterns {
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if b, err := os.ReadFile(m); err == nil && len(b) > 0 {
				return Escaped, fmt.Sprintf("read %d bytes of %s", len(b), m)
			}
		}
	}
	return Contained, fmt.Sprintf("nothing readable at %d places", len(secretPatterns))
}

// refused reports a call that must fail: contained when it did.
func refused(what string, err error) (Status, string) {
	if err == nil {
		return Escaped, what + " succeeded"
	}
	return Contained, what + ": " + errnoOf(err)
}

func probeRemount(*Targets) (Status, string) {
	return refused("mount(/, MS_REMOUNT|MS_BIND)", unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND, ""))
}

func probeSetns(*Targets) (Status, string) {
	fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Contained, "open /proc/self/ns/net: " + errnoOf(err)
	}
	defer unix.Close(fd)
	runtime.LockOSThread() // setns changes the thread; this one is thrown away
	return refused("setns(net)", unix.Setns(fd, unix.CLONE_NEWNET))
}

func probePersonality(*Targets) (Status, string) {
	const readImpliesExec = 0x0400000
	_, _, errno := unix.Syscall(unix.SYS_PERSONALITY, readImpliesExec, 0, 0)
	if errno != 0 {
		return Contained, "personality(READ_IMPLIES_EXEC): " + unix.ErrnoName(errno)
	}
	unix.Syscall(unix.SYS_PERSONALITY, 0, 0, 0)
	return Escaped, "personality(READ_IMPLIES_EXEC) succeeded"
}

// probePtrace starts a child (cordon waiting on its stdin) and attaches.
func probePtrace(*Targets) (Status, string) {
	r, w, err := os.Pipe()
	if err != nil {
		return Error, err.Error()
	}
	defer w.Close()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"cordon", "__hold"}, &syscall.ProcAttr{Files: []uintptr{r.Fd()}})
	r.Close()
	if err != nil {
		return Error, err.Error()
	}
	defer func() {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}()
	runtime.LockOSThread() // the tracer is this thread
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(pid), 0, 0, 0, 0)
	if errno != 0 {
		return Contained, "ptrace(PTRACE_ATTACH): " + unix.ErrnoName(errno)
	}
	return Escaped, fmt.Sprintf("attached to process %d", pid)
}

func probeKeyring(*Targets) (Status, string) {
	_, err := unix.AddKey("user", "cordon-probe", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	return refused("add_key", err)
}

func probeUserfaultfd(*Targets) (Status, string) {
	const userModeOnly = 1 // UFFD_USER_MODE_ONLY: allowed unprivileged
	fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|userModeOnly, 0, 0)
	if errno != 0 {
		return Contained, "userfaultfd: " + unix.ErrnoName(errno)
	}
	unix.Close(int(fd))
	return Escaped, "created a userfaultfd"
}

func probeMount(*Targets) (Status, string) {
	dir, err := os.MkdirTemp("", "probe-mount-")
	if err != nil {
		return Error, err.Error()
	}
	defer os.Remove(dir)
	err = unix.Mount("cordon-probe", dir, "tmpfs", 0, "")
	if err == nil {
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	return refused("mount(tmpfs)", err)
}

func probeChroot(*Targets) (Status, string) {
	// chroot("/") changes nothing when it works; that it works is the
	// escape (chroot-and-climb needs nothing more).
	return refused("chroot(/)", unix.Chroot("/"))
}

func probeClone3(*Targets) (Status, string) {
	// With no arguments the kernel answers EINVAL: reaching it at all is
	// what must not happen.
	_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	if errno == unix.ENOSYS {
		return Contained, "clone3: ENOSYS"
	}
	return Escaped, "clone3 reached the kernel: " + unix.ErrnoName(errno)
}

func probeSysV(t *Targets) (Status, string) {
	if t.SysVKey == 0 {
		return Error, "no segment planted"
	}
	id, err := unix.SysvShmGet(t.SysVKey, 0, 0)
	if err == nil {
		return Escaped, fmt.Sprintf("found the host's segment (id %d)", id)
	}
	return Contained, fmt.Sprintf("shmget(%#x): %s", t.SysVKey, errnoOf(err))
}

func probeHostname(t *Targets) (Status, string) {
	name, _ := os.Hostname()
	if t.HostHostname != "" && name == t.HostHostname {
		return Escaped, "the sandbox sees the host's name " + name
	}
	if err := unix.Sethostname([]byte("cordon-probe")); err == nil {
		unix.Sethostname([]byte(name))
		return Escaped, "sethostname succeeded"
	} else {
		return Contained, fmt.Sprintf("hostname %q; sethostname: %s", name, errnoOf(err))
	}
}

func probeAbstract(t *Targets) (Status, string) {
	if t.AbstractSocket == "" {
		return Error, "no abstract socket planted"
	}
	c, err := net.DialTimeout("unix", t.AbstractSocket, 2*time.Second)
	if err != nil {
		return Contained, t.AbstractSocket + ": " + errnoOf(err)
	}
	c.Close()
	return Escaped, "connected to " + t.AbstractSocket
}

func probeSysfs(*Targets) (Status, string) {
	for _, p := range []string{"/sys/firmware", "/sys/class/net", "/sys/kernel"} {
		if _, err := os.Stat(p); err == nil {
			return Escaped, p + " is visible"
		}
	}
	return Contained, "no /sys"
}

func probeCgroupfs(*Targets) (Status, string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Error, err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, " - "); ok {
			if f := strings.Fields(rest); len(f) > 0 && (f[0] == "cgroup" || f[0] == "cgroup2") {
				return Escaped, "mounted: " + trim(line, 100)
			}
		}
	}
	return Contained, "no cgroup file system in the mount table"
}

// openFDs lists the open descriptors above 2, with raw system calls: an
// os.File would start Go's poller, whose own descriptors would count.
func openFDs() []string {
	dfd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(dfd)
	buf := make([]byte, 4096)
	var names []string
	for {
		n, err := unix.ReadDirent(dfd, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	var out []string
	for _, name := range names {
		if name == "0" || name == "1" || name == "2" || name == fmt.Sprint(dfd) {
			continue
		}
		target := make([]byte, 256)
		n, _ := unix.Readlink("/proc/self/fd/"+name, target)
		out = append(out, name+" -> "+string(target[:max(n, 0)]))
	}
	return out
}

func probeFDs(*Targets) (Status, string) {
	if len(inherited) > 0 {
		return Escaped, "inherited " + strings.Join(inherited, ", ")
	}
	return Contained, "only 0, 1 and 2 were open"
}

func probeInit(*Targets) (Status, string) {
	for _, f := range []string{"/proc/1/environ", "/proc/1/mem", "/proc/1/maps"} {
		fd, err := unix.Open(f, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return Escaped, "opened " + f
		}
	}
	return Contained, "/proc/1/environ, mem and maps refused"
}

func probeUDP(t *Targets) (Status, string) {
	if t.UDPAddr == "" {
		return Error, "no UDP service planted"
	}
	c, err := net.Dial("udp", t.UDPAddr)
	if err != nil {
		return Contained, t.UDPAddr + ": " + errnoOf(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("probe")); err != nil {
		return Contained, t.UDPAddr + ": " + errnoOf(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err == nil && strings.HasPrefix(string(buf[:n]), "cordon-canary") {
		return Escaped, "the host's UDP service at " + t.UDPAddr + " answered"
	}
	return Contained, "no answer from " + t.UDPAddr
}
