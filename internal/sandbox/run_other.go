//go:build !linux

package sandbox

import (
	"errors"
	"time"

	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// Run is only possible on Linux.
func Run(Options) (outcome.Outcome, error) {
	err := &SetupError{Stage: "platform", Err: errors.New("cordon sandboxes need Linux")}
	return outcome.Decide(outcome.Facts{Err: err}), err
}

// Executable is a sealed copy of cordon; only on Linux.
type Executable struct{}

// SealExecutable does nothing outside Linux.
func SealExecutable() *Executable { return &Executable{} }

// Close does nothing outside Linux.
func (*Executable) Close() {}
