// Package seccomp installs cordon's system call filter. The filter for each
// architecture is assembled from package policy when the source is
// generated, and kept here as the instructions the kernel takes: starting a
// sandbox neither assembles a program nor loads syscall tables.
package seccomp

//go:generate go test ./policy -run TestGeneratedPrograms -args -update

import (
	"fmt"
	"runtime"
)

// Return values of a filter (linux/seccomp.h).
const (
	RetKillProcess uint32 = 0x80000000
	RetErrno       uint32 = 0x00050000
	RetAllow       uint32 = 0x7fff0000
)

// Instruction is one classic BPF instruction, as struct sock_filter.
type Instruction struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Program is the filter for one architecture.
type Program struct {
	Arch         string // GOARCH
	Instructions []Instruction
}

// Native returns the filter for the architecture cordon runs on.
func Native() (*Program, error) {
	if len(native) == 0 {
		return nil, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	return &Program{Arch: runtime.GOARCH, Instructions: native}, nil
}
