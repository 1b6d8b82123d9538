//go:build linux && !amd64

package probe

// No foreign architecture probe here: only x86_64 runs another
// architecture's system calls in the same process (i386's int 0x80, x32).
var foreignArch []Probe

func int80Child() int { return usageErr("int 0x80 exists only on x86_64") }
