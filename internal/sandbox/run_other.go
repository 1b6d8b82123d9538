//go:build !linux

package sandbox

import "errors"

// Run is only possible on Linux.
func Run(Options) (*Result, error) {
	return nil, &SetupError{Stage: "platform", Err: errors.New("cordon sandboxes need Linux")}
}
