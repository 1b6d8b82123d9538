//go:build !linux

package sandbox

import "runtime"

// ProbeHost reports that nothing cordon needs exists outside Linux.
func ProbeHost() Host {
	return Host{Kernel: runtime.GOOS, Arch: runtime.GOARCH, UserNamespaces: "not Linux",
		Seccomp: "not Linux", Cgroup: Cgroup{Version: "none"}}
}
