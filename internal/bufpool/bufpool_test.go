//go:build !race

// (The race detector makes sync.Pool drop what is put back, at random.)

package bufpool

import "testing"

// A buffer given back is lent again rather than a new one made: lending
// one per command allocates nothing once the pool holds one.
func TestReuse(t *testing.T) {
	b := Get()
	if len(b) != Size {
		t.Fatalf("a buffer of %d bytes; want %d", len(b), Size)
	}
	Put(b)
	if allocs := testing.AllocsPerRun(100, func() { Put(Get()) }); allocs > 0 {
		t.Errorf("%.1f allocations per loan; want none", allocs)
	}
}
