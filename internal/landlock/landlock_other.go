//go:build !linux

package landlock

import "errors"

// View is what the sandbox may touch.
type View struct {
	WritableDirs  []string
	WritableFiles []string
	Devices       []string
	Refer         bool
}

// MinABI is the Landlock ABI cordon needs.
const MinABI = 6

// ABI is 0 outside Linux.
func ABI() int { return 0 }

// Restrict is only possible on Linux.
func Restrict(View) (int, error) { return 0, errors.New("landlock: only on Linux") }
