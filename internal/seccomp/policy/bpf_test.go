package policy

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// data builds a struct seccomp_data, as a little-endian kernel lays it out,
// for the interpreter. The interpreter loads 32-bit words in network byte
// order where the kernel uses native order, so each word is written
// big-endian at the offset the kernel would place it: the low half of a
// 64-bit argument first.
func data(a *arch.Info, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], uint32(a.ID))
	for i, v := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(v))
		binary.BigEndian.PutUint32(b[16+8*i+4:], uint32(v>>32))
	}
	return b
}

// eval runs the program for one syscall and returns the seccomp action.
func eval(t *testing.T, p *Program, d []byte) uint32 {
	t.Helper()
	vm, err := bpf.NewVM(p.Instructions)
	if err != nil {
		t.Fatalf("program rejected by the BPF interpreter: %v", err)
	}
	ret, err := vm.Run(d)
	if err != nil {
		t.Fatalf("running program: %v", err)
	}
	return uint32(ret)
}

func nr(t *testing.T, a *arch.Info, name string) uint32 {
	t.Helper()
	n, ok := a.SyscallNames[name]
	if !ok {
		t.Fatalf("%s has no syscall %s", a.Name, name)
	}
	return uint32(n)
}

func actionName(v uint32) string {
	switch {
	case v == RetAllow:
		return "allow"
	case v == RetKillProcess:
		return "kill"
	case v&0xffff0000 == RetErrno:
		return fmt.Sprintf("errno(%d)", v&0xffff)
	}
	return fmt.Sprintf("%#x", v)
}

func TestFilterDecisions(t *testing.T) {
	for _, a := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		p, err := Build(a)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			syscall string
			args    []uint64
			want    uint32
		}{
			{"read is allowed", "read", nil, RetAllow},
			{"execve is allowed", "execve", nil, RetAllow},
			{"ptrace is denied", "ptrace", nil, errno(errnoEPERM)},
			{"mount is denied", "mount", nil, errno(errnoEPERM)},
			{"unshare is denied", "unshare", nil, errno(errnoEPERM)},
			{"setns is denied", "setns", nil, errno(errnoEPERM)},
			{"bpf is denied", "bpf", nil, errno(errnoEPERM)},
			{"io_uring_setup is denied", "io_uring_setup", nil, errno(errnoEPERM)},
			{"TIOCSTI is denied", "ioctl", []uint64{0, tiocsti}, errno(errnoEPERM)},
			{"TIOCSTI with high bits is denied (CVE-2019-10063)", "ioctl", []uint64{0, 1<<32 | tiocsti}, errno(errnoEPERM)},
			{"TIOCLINUX is denied", "ioctl", []uint64{0, tioclinux}, errno(errnoEPERM)},
			{"TCGETS is allowed", "ioctl", []uint64{0, 0x5401}, RetAllow},
			{"clone of a thread is allowed", "clone", []uint64{0x3d0f00}, RetAllow},
			{"clone of a process is allowed", "clone", []uint64{0x01200011}, RetAllow},
			{"clone with CLONE_NEWUSER is denied", "clone", []uint64{0x10000000 | 17}, errno(errnoEPERM)},
			{"clone with CLONE_NEWNS is denied", "clone", []uint64{0x00020000}, errno(errnoEPERM)},
			{"clone3 is ENOSYS", "clone3", nil, errno(errnoENOSYS)},
			{"AF_INET sockets are allowed", "socket", []uint64{afInet}, RetAllow},
			{"AF_UNIX sockets are allowed", "socket", []uint64{afUnix}, RetAllow},
			{"AF_PACKET sockets are refused", "socket", []uint64{17}, errno(errnoEAFNOSUPPORT)},
			{"AF_VSOCK sockets are refused", "socket", []uint64{40}, errno(errnoEAFNOSUPPORT)},
			{"AF_ALG sockets are refused", "socket", []uint64{38}, errno(errnoEAFNOSUPPORT)},
			{"AF_INET with high bits is still AF_INET", "socket", []uint64{1<<32 | afInet}, RetAllow},
			{"socketpair AF_UNIX is allowed", "socketpair", []uint64{afUnix}, RetAllow},
			{"socketpair AF_INET is refused", "socketpair", []uint64{afInet}, errno(errnoEAFNOSUPPORT)},
			{"chmod 0755 is allowed", "fchmodat", []uint64{0, 0, 0o755}, RetAllow},
			{"chmod u+s is refused", "fchmodat", []uint64{0, 0, 0o4755}, errno(errnoEPERM)},
			{"chmod g+s is refused", "fchmodat2", []uint64{0, 0, 0o2755, 0}, errno(errnoEPERM)},
			{"fchmod u+s is refused", "fchmod", []uint64{3, 0o4711}, errno(errnoEPERM)},
			{"openat creating a setuid file is refused", "openat", []uint64{0, 0, 0o101, 0o4755}, errno(errnoEPERM)},
			{"openat creating an ordinary file is allowed", "openat", []uint64{0, 0, 0o101, 0o644}, RetAllow},
			{"openat without O_CREAT ignores the mode", "openat", []uint64{0, 0, 0, 0o7777}, RetAllow},
			{"O_TMPFILE with setuid is refused", "openat", []uint64{0, 0, 0x00410002, 0o4755}, errno(errnoEPERM)},
			{"mknodat a setuid file is refused", "mknodat", []uint64{0, 0, 0o104755, 0}, errno(errnoEPERM)},
			{"mknodat a fifo is allowed", "mknodat", []uint64{0, 0, 0o10644, 0}, RetAllow},
			{"openat2 is ENOSYS", "openat2", nil, errno(errnoENOSYS)},
			{"io_setup is ENOSYS", "io_setup", []uint64{128, 0}, errno(errnoENOSYS)},
			{"personality query is allowed", "personality", []uint64{0xffffffff}, RetAllow},
			{"READ_IMPLIES_EXEC is refused", "personality", []uint64{0x0400000}, errno(errnoEPERM)},
			{"ADDR_NO_RANDOMIZE is refused", "personality", []uint64{0x0040000}, errno(errnoEPERM)},
		}
		for _, tt := range tests {
			t.Run(a.Name+"/"+tt.name, func(t *testing.T) {
				got := eval(t, p, data(a, nr(t, a, tt.syscall), tt.args...))
				if got != tt.want {
					t.Errorf("%s: got %s, want %s", tt.syscall, actionName(got), actionName(tt.want))
				}
			})
		}
	}
}

func TestForeignArchitectureIsKilled(t *testing.T) {
	p, err := Build(arch.X86_64)
	if err != nil {
		t.Fatal(err)
	}
	// int 0x80: i386 number 11 is execve there but munmap on x86_64.
	d := data(arch.I386, 11)
	if got := eval(t, p, d); got != RetKillProcess {
		t.Errorf("i386 syscall: got %s, want kill", actionName(got))
	}
}

func TestX32IsRefused(t *testing.T) {
	p, err := Build(arch.X86_64)
	if err != nil {
		t.Fatal(err)
	}
	// x32 read: the x32 bit set on an otherwise allowed number.
	d := data(arch.X86_64, x32SyscallBit|nr(t, arch.X86_64, "read"))
	if got := eval(t, p, d); got != errno(errnoENOSYS) {
		t.Errorf("x32 read: got %s, want errno(%d)", actionName(got), errnoENOSYS)
	}
}

func TestEveryListedSyscall(t *testing.T) {
	for _, a := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		p, err := Build(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range Allowed {
			n, ok := a.SyscallNames[name]
			if !ok {
				continue
			}
			if got := eval(t, p, data(a, uint32(n))); got != RetAllow {
				t.Errorf("%s %s: got %s, want allow", a.Name, name, actionName(got))
			}
		}
		for _, name := range Denied {
			n, ok := a.SyscallNames[name]
			if !ok {
				continue
			}
			if got := eval(t, p, data(a, uint32(n))); got == RetAllow {
				t.Errorf("%s %s: allowed, must be denied", a.Name, name)
			}
		}
		// A number no kernel has yet is refused.
		if got := eval(t, p, data(a, 1020)); got != errno(errnoEPERM) {
			t.Errorf("%s unknown syscall: got %s, want EPERM", a.Name, actionName(got))
		}
	}
}

func TestListsAreDisjointAndKnown(t *testing.T) {
	for _, name := range Denied {
		if slices.Contains(Allowed, name) {
			t.Errorf("%s is both allowed and denied", name)
		}
	}
	// Calls ordinary programs cannot do without must exist on both
	// architectures, or the table is stale.
	for _, name := range []string{"read", "write", "openat", "execve", "mmap", "futex", "clone", "exit_group", "rseq", "statx", "faccessat2", "pidfd_open"} {
		for _, a := range []*arch.Info{arch.X86_64, arch.AARCH64} {
			if _, ok := a.SyscallNames[name]; !ok {
				t.Errorf("%s: no syscall %s in the table", a.Name, name)
			}
		}
	}
}

func TestWeakenedFilterLetsPtraceThrough(t *testing.T) {
	// The test above must be able to fail: with ptrace on the allowlist the
	// same check reports it allowed.
	saved := Allowed
	defer func() { Allowed = saved }()
	Allowed = append(slices.Clone(saved), "ptrace")
	p, err := Build(arch.X86_64)
	if err != nil {
		t.Fatal(err)
	}
	if got := eval(t, p, data(arch.X86_64, nr(t, arch.X86_64, "ptrace"))); got != RetAllow {
		t.Fatalf("weakened filter: ptrace got %s, want allow", actionName(got))
	}
}

func TestRanges(t *testing.T) {
	got := ranges([]uint32{0, 1, 2, 5, 7, 8})
	want := [][2]uint32{{0, 2}, {5, 5}, {7, 8}}
	if !slices.Equal(got, want) {
		t.Errorf("ranges: got %v, want %v", got, want)
	}
}

func BenchmarkBuild(b *testing.B) {
	for b.Loop() {
		if _, err := Build(arch.X86_64); err != nil {
			b.Fatal(err)
		}
	}
}
