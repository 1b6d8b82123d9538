package sandbox

import (
	"testing"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Without a cgroup, each limit says what enforced it instead; host root is
// not bound by RLIMIT_NPROC, so its pids limit is unenforced.
func TestEnforcedByWithoutCgroup(t *testing.T) {
	for _, tt := range []struct {
		hostRoot   bool
		name, want string
	}{
		{false, "pids", "rlimit"},
		{true, "pids", "unenforced"},
		{false, "memory", outcome.PrivateMemoryRlimit},
		{false, "cpus", "unenforced"},
		{false, "cpu_time", "rlimit"},
		{false, "file_size", "rlimit"},
	} {
		l := &limiter{hostRoot: tt.hostRoot}
		if got := l.enforcedBy(tt.name); got != tt.want {
			t.Errorf("%s (host root %v): got %q, want %q", tt.name, tt.hostRoot, got, tt.want)
		}
	}
}

// The sandbox's own loopback bypasses the proxy unless the allowlist sends
// loopback to the host's.
func TestAllowsLoopback(t *testing.T) {
	for dest, want := range map[string]bool{
		"registry.npmjs.org": false, "10.0.0.0/8": false, "127.0.0.1:8080": true, "localhost": true,
		"LOCALHOST:3000": true, "[::1]:80": true, "127.0.0.0/8": true, "0.0.0.0/0": true, "::/0": true,
	} {
		if got := allowsLoopback([]profile.Destination{{Dest: dest}}); got != want {
			t.Errorf("%s: got %v, want %v", dest, got, want)
		}
	}
}
