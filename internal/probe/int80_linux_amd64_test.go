package probe

import (
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Only a pid the i386 call returned is an escape; a child that ends without
// a report is an error that says how it ended, never an escape.
func TestJudgeInt80(t *testing.T) {
	exited := func(code int) unix.WaitStatus { return unix.WaitStatus(code << 8) }
	killed := unix.WaitStatus(syscall.SIGSYS)
	for _, c := range []struct {
		child    child
		want     Status
		evidence string
	}{
		{child{ws: killed}, Contained, "killed by bad system call"},
		{child{out: "ENOSYS"}, Contained, "ENOSYS"},
		{child{out: "SIGSEGV (runtime error: invalid memory address or nil pointer dereference)"}, Contained, "refuses int 0x80"},
		{child{out: "pid 7"}, Escaped, "pid 7"},
		{child{ws: exited(2), stderr: "unexpected fault address 0x0"}, Error, "exited with status 2 without a report; it wrote: unexpected fault address"},
		{child{out: "something else", ws: exited(0)}, Error, "something else"},
	} {
		got, evidence := judgeInt80(c.child)
		if got != c.want || !strings.Contains(evidence, c.evidence) {
			t.Errorf("%+v: got %s %q, want %s with %q", c.child, got, evidence, c.want, c.evidence)
		}
	}
}
