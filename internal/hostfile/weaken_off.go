//go:build !cordon_weaken

package hostfile

// weak is false in every release build.
func weak() bool { return false }
