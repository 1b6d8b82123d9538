package sandbox

import (
	"testing"

	"github.com/cordon-sandbox/cordon/internal/outcome"
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
