//go:build !linux

package sandbox

import "errors"

// Run is only possible on Linux.
func Run(Options) (*Result, error) {
	return nil, &SetupError{Stage: "platform", Err: errors.New("cordon sandboxes need Linux")}
}

// Executable is a sealed copy of cordon; only on Linux.
type Executable struct{}

// SealExecutable does nothing outside Linux.
func SealExecutable() *Executable { return &Executable{} }

// Close does nothing outside Linux.
func (*Executable) Close() {}
