//go:build !cordon_weaken

package sandbox

// weakened is always false in cordon: only test builds (the cordon_weaken
// tag) can take a layer away, to show the escape probes can fail.
func weakened(string) bool { return false }

// Weakened is always false in cordon.
func Weakened(string) bool { return false }

// anyWeakened is always false in cordon.
func anyWeakened() bool { return false }

// dieAt does nothing in cordon: only test builds die on purpose.
func dieAt(string) {}
