// Package policy is cordon's system call policy: a default-deny allowlist
// broad enough for compilers, interpreters and package managers, with
// argument checks where a whole call cannot be allowed, assembled into a
// seccomp BPF program for each architecture.
//
// The program is assembled here rather than by a generic library because two
// details decide whether it contains anything: a foreign architecture (i386
// through int 0x80) must be killed before the syscall number is read, since
// numbers mean different calls there; and argument checks must compare only
// the 32 bits the kernel reads (ioctl's request is an unsigned int, so
// TIOCSTI|1<<32 is TIOCSTI: CVE-2019-10063). Syscall numbers come from the
// tables of github.com/elastic/go-seccomp-bpf.
//
// Assembly is pure and tested by running the program in a BPF interpreter.
// It happens once, when the source is generated: the programs are written
// into package seccomp (go generate ./internal/seccomp), which installs
// them, so that cordon neither assembles a program nor carries syscall
// tables at run time. A test fails while the written programs differ from
// what this package assembles.
package policy

import "sort"

// Allowed are the system calls the sandboxed command may make without
// conditions. Names that do not exist on an architecture are skipped. The
// list follows Docker's default profile minus what cordon denies (see Denied).
var Allowed = []string{
	// files and directories
	"access", "faccessat", "faccessat2", "open", "openat", "creat", "close", "close_range",
	"read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64", "pwritev", "pwritev2",
	"lseek", "_llseek", "stat", "stat64", "fstat", "fstat64", "lstat", "lstat64", "newfstatat", "fstatat64", "statx",
	"statfs", "statfs64", "fstatfs", "fstatfs64", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
	"mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat",
	"symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2",
	"chown", "chown32", "fchown", "fchown32", "fchownat", "lchown", "lchown32", "umask",
	"truncate", "truncate64", "ftruncate", "ftruncate64", "fallocate", "fadvise64", "fadvise64_64", "readahead",
	"fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "flock", "fcntl", "fcntl64",
	"dup", "dup2", "dup3", "pipe", "pipe2", "mknod", "mknodat",
	"utime", "utimes", "utimensat", "utimensat_time64", "futimesat",
	"getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
	"listxattr", "llistxattr", "flistxattr", "listxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"copy_file_range", "sendfile", "sendfile64", "splice", "tee", "vmsplice",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	"memfd_create", "memfd_secret", "cachestat",
	// memory
	"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
	"mlock", "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages", "membarrier",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "mseal", "map_shadow_stack", "get_mempolicy",
	// processes, threads, signals
	"execve", "execveat", "fork", "vfork", "exit", "exit_group", "wait4", "waitid", "waitpid",
	"getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
	"getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32", "getegid", "getegid32",
	"getresuid", "getresuid32", "getresgid", "getresgid32", "getgroups", "getgroups32",
	"setuid", "setuid32", "setgid", "setgid32", "setreuid", "setreuid32", "setregid", "setregid32",
	"setresuid", "setresuid32", "setresgid", "setresgid32", "setfsuid", "setfsuid32", "setfsgid", "setfsgid32",
	"setgroups", "setgroups32", "capget", "capset", "prctl", "arch_prctl",
	"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "set_thread_area", "get_thread_area",
	"futex", "futex_time64", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
	"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
	"rt_sigsuspend", "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"sigaltstack", "sigreturn", "sigprocmask", "signalfd", "signalfd4", "pause", "restart_syscall",
	"pidfd_open", "pidfd_send_signal", "process_mrelease",
	"getrlimit", "ugetrlimit", "setrlimit", "prlimit64", "getrusage", "getpriority", "setpriority",
	"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
	"sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
	"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "sched_rr_get_interval_time64",
	"ioprio_get", "ioprio_set", "getcpu", "uretprobe",
	// time
	"time", "gettimeofday", "clock_gettime", "clock_gettime64", "clock_getres", "clock_getres_time64",
	"clock_nanosleep", "clock_nanosleep_time64", "nanosleep", "times", "adjtimex", "clock_adjtime", "clock_adjtime64",
	"alarm", "getitimer", "setitimer", "timer_create", "timer_delete", "timer_getoverrun",
	"timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64",
	"timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime", "timerfd_settime64",
	// events and polling
	"poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6", "pselect6_time64",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"eventfd", "eventfd2",
	// asynchronous I/O (not io_uring; io_setup is ENOSYS, see bpf.go)
	"io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents", "io_pgetevents_time64",
	// sockets (socket and socketpair are checked by family, see below)
	"bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername", "getsockopt", "setsockopt",
	"send", "sendto", "sendmsg", "sendmmsg", "recv", "recvfrom", "recvmsg", "recvmmsg", "recvmmsg_time64", "shutdown",
	// System V and POSIX IPC (private to the sandbox's IPC namespace)
	"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semtimedop_time64", "semctl",
	"shmget", "shmat", "shmdt", "shmctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedsend_time64", "mq_timedreceive", "mq_timedreceive_time64",
	"mq_notify", "mq_getsetattr",
	// system information and self-confinement
	"uname", "sysinfo", "getrandom", "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
}

// Denied lists, for documentation and tests, the calls the filter must refuse
// even though some are allowed by other sandboxes' defaults.
var Denied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "listmount", "statmount",
	"unshare", "setns", "clone3", "openat2",
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "io_setup",
	"keyctl", "add_key", "request_key",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at", "name_to_handle_at", "fanotify_init", "fanotify_mark",
	"reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "lookup_dcookie",
	"settimeofday", "clock_settime", "clock_settime64", "stime",
	"sethostname", "setdomainname", "iopl", "ioperm", "modify_ldt", "vhangup", "uselib", "ustat", "sysfs",
	"mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages", "move_pages",
	"lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules",
}

// Values the argument checks compare with.
const (
	tiocsti   = 0x5412
	tioclinux = 0x541c

	// cloneNamespaces are the CLONE_NEW* flags clone(2) accepts: CLONE_NEWNS,
	// CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
	// CLONE_NEWPID and CLONE_NEWNET.
	cloneNamespaces = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
)

// SocketFamilies are the address families socket(2) may create. Everything
// else (AF_PACKET, AF_VSOCK, AF_ALG, AF_KEY, Bluetooth, ...) fails with
// EAFNOSUPPORT, as if the kernel lacked it.
var SocketFamilies = []uint32{afUnix, afInet, afInet6, afNetlink}

// Personalities are the personality(2) values allowed: the default, the
// query (0xffffffff), PER_LINUX32 and UNAME26 and their combination. Flags such
// as READ_IMPLIES_EXEC and ADDR_NO_RANDOMIZE are refused.
var Personalities = []uint32{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff}

func sortedUnique(nums []uint32) []uint32 {
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	out := nums[:0]
	for i, n := range nums {
		if i == 0 || n != nums[i-1] {
			out = append(out, n)
		}
	}
	return out
}
