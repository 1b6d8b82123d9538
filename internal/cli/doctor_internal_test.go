package cli

import (
	"strings"
	"testing"
)

// A core_pattern that pipes crashes to a program is named, with what it
// means for a sandbox; one that writes files is not a concern.
func TestCrashDumps(t *testing.T) {
	for _, tt := range []struct{ pattern, want string }{
		{"|/usr/share/apport/apport -p%p -s%s -c%c -d%d -P%P -u%u -g%g -- %E", "pipes every crash to /usr/share/apport/apport, which the kernel starts as root"},
		{"|/lib/systemd/systemd-coredump %P %u %g %s %t 9223372036854775808 %h", "to /lib/systemd/systemd-coredump,"},
		{"core", "none: RLIMIT_CORE is 0"},
		{"/var/crash/core.%e.%p", "none: RLIMIT_CORE is 0"},
	} {
		if got := crashDumps(tt.pattern); !strings.Contains(got, tt.want) {
			t.Errorf("%q: got %q, want it to contain %q", tt.pattern, got, tt.want)
		}
	}
}
