//go:build !linux

package sandbox

import (
	"errors"
	"runtime"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// ProbeHost reports that nothing cordon needs exists outside Linux.
func ProbeHost() Host {
	return Host{Kernel: runtime.GOOS, Arch: runtime.GOARCH, UserNamespaces: "not Linux",
		Seccomp: "not Linux", Cgroup: Cgroup{Version: "none"}}
}

// Trial fails outside Linux.
func Trial(*profile.Profile, map[string]bool) error { return errors.New("cordon sandboxes need Linux") }

// IdmapCheck has nothing to check outside Linux.
func IdmapCheck(string) error { return nil }
