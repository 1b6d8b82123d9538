//go:build !linux

package sandbox

import "runtime"

// Host is what this host supports, as far as cordon is concerned.
type Host struct {
	Kernel         string `json:"kernel"`
	Arch           string `json:"arch"`
	Root           bool   `json:"root"`
	UID            int    `json:"uid"`
	UserNamespaces string `json:"user_namespaces_error,omitempty"`
	LandlockABI    int    `json:"landlock_abi"`
	Seccomp        string `json:"seccomp_error,omitempty"`
	SeccompNotify  bool   `json:"seccomp_user_notification"`
	Cgroup         Cgroup `json:"cgroup"`
}

// Cgroup describes the cgroup hierarchy of the host.
type Cgroup struct {
	Version       string   `json:"version"`
	V1Controllers []string `json:"v1_controllers,omitempty"`
	V2Controllers []string `json:"v2_controllers,omitempty"`
	Delegated     bool     `json:"delegated"`
}

// ProbeHost reports that nothing cordon needs exists outside Linux.
func ProbeHost() Host {
	return Host{Kernel: runtime.GOOS, Arch: runtime.GOARCH, UserNamespaces: "not Linux",
		Seccomp: "not Linux", Cgroup: Cgroup{Version: "none"}}
}
