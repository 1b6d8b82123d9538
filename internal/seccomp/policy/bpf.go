package policy

import (
	"fmt"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"

	"github.com/cordon-sandbox/cordon/internal/seccomp"
)

// Return values, as package seccomp names them.
const (
	RetKillProcess = seccomp.RetKillProcess
	RetErrno       = seccomp.RetErrno
	RetAllow       = seccomp.RetAllow

	errnoEPERM        = 1
	errnoENOSYS       = 38
	errnoEAFNOSUPPORT = 97

	x32SyscallBit = 0x40000000
)

// Offsets into struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Program is an assembled filter with what it was built from.
type Program struct {
	Arch         *arch.Info
	Instructions []bpf.Instruction
	// Skipped are allowlist names this architecture does not have.
	Skipped []string
}

// special are syscalls decided by their arguments, or refused with an errno
// other than EPERM. Each returns the instructions of its block, which ends in
// a return.
var special = []struct {
	name  string
	block func() []bpf.Instruction
}{
	// ioctl(fd, request): the request is an unsigned int; compare its low 32
	// bits so that high bits cannot hide TIOCSTI or TIOCLINUX.
	{"ioctl", func() []bpf.Instruction {
		return append([]bpf.Instruction{loadArgLow(1)}, memberOf([]uint32{tiocsti, tioclinux}, errno(errnoEPERM), RetAllow)...)
	}},
	// clone(flags, ...): no new namespaces.
	{"clone", func() []bpf.Instruction {
		return []bpf.Instruction{
			loadArgLow(0),
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaces, SkipTrue: 1},
			bpf.RetConstant{Val: RetAllow},
			bpf.RetConstant{Val: errno(errnoEPERM)},
		}
	}},
	// clone3 passes its flags in memory, where seccomp cannot read them:
	// ENOSYS makes the C library fall back to clone, which is checked.
	{"clone3", func() []bpf.Instruction {
		return []bpf.Instruction{bpf.RetConstant{Val: errno(errnoENOSYS)}}
	}},
	{"socket", func() []bpf.Instruction {
		return append([]bpf.Instruction{loadArgLow(0)}, memberOf(SocketFamilies, RetAllow, errno(errnoEAFNOSUPPORT))...)
	}},
	{"socketpair", func() []bpf.Instruction {
		return append([]bpf.Instruction{loadArgLow(0)}, memberOf([]uint32{afUnix}, RetAllow, errno(errnoEAFNOSUPPORT))...)
	}},
	{"personality", func() []bpf.Instruction {
		return append([]bpf.Instruction{loadArgLow(0)}, memberOf(Personalities, RetAllow, errno(errnoEPERM))...)
	}},
	// No set-user-ID or set-group-ID bits: a file the sandbox creates in a
	// writable bind is a file on the host, where such a bit would grant the
	// file's host owner (root, for an idmapped root-owned workspace) to
	// whoever runs it.
	{"chmod", func() []bpf.Instruction { return noSetID(1, -1) }},
	{"fchmod", func() []bpf.Instruction { return noSetID(1, -1) }},
	{"fchmodat", func() []bpf.Instruction { return noSetID(2, -1) }},
	{"fchmodat2", func() []bpf.Instruction { return noSetID(2, -1) }},
	{"creat", func() []bpf.Instruction { return noSetID(1, -1) }},
	{"mknod", func() []bpf.Instruction { return noSetID(1, -1) }},
	{"mknodat", func() []bpf.Instruction { return noSetID(2, -1) }},
	{"open", func() []bpf.Instruction { return noSetID(2, 1) }},
	{"openat", func() []bpf.Instruction { return noSetID(3, 2) }},
	// Native asynchronous I/O contexts count against fs.aio-max-nr, one
	// number for the whole host: a sandbox that used it up would leave the
	// host's databases and virtual machines without. ENOSYS is what a
	// kernel without AIO answers; libaio's users fall back to threads.
	{"io_setup", func() []bpf.Instruction {
		return []bpf.Instruction{bpf.RetConstant{Val: errno(errnoENOSYS)}}
	}},
	// openat2 passes its mode in memory, where seccomp cannot read it:
	// ENOSYS makes the C library fall back to openat, which is checked.
	{"openat2", func() []bpf.Instruction {
		return []bpf.Instruction{bpf.RetConstant{Val: errno(errnoENOSYS)}}
	}},
}

// Mode bits and open flags the set-ID checks read.
const (
	modeSetID  = 06000      // S_ISUID | S_ISGID
	openCreate = 0100       // O_CREAT
	openTmp    = 0x00400000 // __O_TMPFILE
)

// noSetID refuses (EPERM) a mode argument with S_ISUID or S_ISGID; when
// flagsArg is not -1, only for an open that creates a file.
func noSetID(modeArg, flagsArg int) []bpf.Instruction {
	var prog []bpf.Instruction
	if flagsArg >= 0 {
		prog = append(prog,
			loadArgLow(uint32(flagsArg)),
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: openCreate | openTmp, SkipFalse: 3},
		)
	}
	return append(prog,
		loadArgLow(uint32(modeArg)),
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: modeSetID, SkipFalse: 1},
		bpf.RetConstant{Val: errno(errnoEPERM)},
		bpf.RetConstant{Val: RetAllow},
	)
}

// Build assembles the filter for one architecture:
//
//  1. a foreign architecture kills the process;
//  2. on x86_64, x32 syscalls fail with ENOSYS;
//  3. the special syscalls are decided by their arguments;
//  4. the allowlist, as ascending ranges of syscall numbers, allows;
//  5. anything else fails with EPERM.
func Build(a *arch.Info) (*Program, error) {
	if a == nil || a.SyscallNames == nil {
		return nil, fmt.Errorf("seccomp: no syscall table for this architecture")
	}
	p := &Program{Arch: a}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(a.ID), SkipTrue: 1},
		bpf.RetConstant{Val: RetKillProcess},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if a.ID == arch.X86_64.ID {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: errno(errnoENOSYS)},
		)
	}

	specialNrs := map[uint32]bool{}
	for _, s := range special {
		nr, ok := a.SyscallNames[s.name]
		if !ok {
			continue
		}
		specialNrs[uint32(nr)] = true
		block := s.block()
		if len(block) > 255 {
			return nil, fmt.Errorf("seccomp: block for %s too long", s.name)
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: uint8(len(block))})
		prog = append(prog, block...)
	}

	var nrs []uint32
	for _, name := range Allowed {
		nr, ok := a.SyscallNames[name]
		if !ok {
			p.Skipped = append(p.Skipped, name)
			continue
		}
		if !specialNrs[uint32(nr)] {
			nrs = append(nrs, uint32(nr))
		}
	}
	for _, r := range ranges(sortedUnique(nrs)) {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: r[1], SkipTrue: 3},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: r[0], SkipFalse: 1},
			bpf.RetConstant{Val: RetAllow},
			bpf.RetConstant{Val: errno(errnoEPERM)},
		)
	}
	prog = append(prog, bpf.RetConstant{Val: errno(errnoEPERM)})
	if len(prog) > 4096 {
		return nil, fmt.Errorf("seccomp: program has %d instructions, the kernel takes 4096", len(prog))
	}
	p.Instructions = prog
	return p, nil
}

// ranges groups ascending numbers into [lo, hi] runs.
func ranges(nrs []uint32) [][2]uint32 {
	var out [][2]uint32
	for _, n := range nrs {
		if len(out) > 0 && out[len(out)-1][1]+1 == n {
			out[len(out)-1][1] = n
			continue
		}
		out = append(out, [2]uint32{n, n})
	}
	return out
}

// memberOf returns instructions that return in when the accumulator equals
// one of vals, and out otherwise.
func memberOf(vals []uint32, in, out uint32) []bpf.Instruction {
	var prog []bpf.Instruction
	for i, v := range vals {
		// Skip the remaining comparisons and the "out" return.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(vals) - i)})
	}
	return append(prog, bpf.RetConstant{Val: out}, bpf.RetConstant{Val: in})
}

func errno(e uint32) uint32 { return RetErrno | e }

// loadArgLow loads the low 32 bits of syscall argument i.
func loadArgLow(i uint32) bpf.Instruction {
	off := offArgs + 8*i
	if !littleEndian {
		off += 4
	}
	return bpf.LoadAbsolute{Off: off, Size: 4}
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
