package sandbox

import "testing"

// Without a cgroup, each limit says what enforced it instead; host root is
// not bound by RLIMIT_NPROC, so its pids limit is unenforced.
func TestEnforcedByWithoutCgroup(t *testing.T) {
	for _, tt := range []struct {
		l          limiter
		name, want string
	}{
		{limiter{}, "pids", "rlimit"},
		{limiter{hostRoot: true}, "pids", "unenforced"},
		{limiter{}, "memory", "rlimit"},
		{limiter{}, "cpus", "unenforced"},
		{limiter{}, "cpu_time", "rlimit"},
		{limiter{}, "file_size", "rlimit"},
	} {
		if got := tt.l.enforcedBy(tt.name); got != tt.want {
			t.Errorf("%s (host root %v): got %q, want %q", tt.name, tt.l.hostRoot, got, tt.want)
		}
	}
}
