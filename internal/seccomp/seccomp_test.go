package seccomp

import (
	"runtime"
	"testing"
)

// The filter kept for this architecture starts by checking the
// architecture, and ends by refusing what it did not allow.
func TestNative(t *testing.T) {
	p, err := Native()
	if runtime.GOOS != "linux" {
		if err == nil {
			t.Fatal("a filter outside Linux")
		}
		return
	}
	if err != nil {
		t.Skip(err) // an architecture without a syscall table
	}
	first, last := p.Instructions[0], p.Instructions[len(p.Instructions)-1]
	if first != (Instruction{Code: 0x20, K: 4}) { // ld [4]: seccomp_data.arch
		t.Errorf("first instruction %+v does not load the architecture", first)
	}
	if last != (Instruction{Code: 0x06, K: RetErrno | 1}) { // ret EPERM
		t.Errorf("last instruction %+v is not ret EPERM", last)
	}
}
