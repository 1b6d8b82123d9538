//go:build !linux

package seccomp

import "errors"

// Install is only possible on Linux.
func (p *Program) Install() error { return errors.New("seccomp: only on Linux") }

// Available reports that seccomp is missing outside Linux.
func Available() error { return errors.New("seccomp: only on Linux") }
