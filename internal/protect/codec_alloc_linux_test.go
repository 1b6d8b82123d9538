package protect

import (
	"runtime"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/bincode"
)

// A damaged or planted walk index whose directory count is as large as the
// rest of the file could hold (three bytes an entry) makes decode size a
// map for that many entries before the first entry fails to read. The
// allocation should stay in proportion to the file, not many times it.
func TestCacheFileCountAllocation(t *testing.T) {
	const size = 16 << 20 // a file well within maxIndex (256 MiB)
	e := &bincode.Encoder{B: []byte(indexMagic)}
	e.String("/w")
	e.Uint(0)
	e.Uint(0)
	e.Uint(size / 3) // directories claimed: what the file could hold
	b := append(e.B, make([]byte, size)...)
	for i := len(e.B); i < len(b); i++ {
		b[i] = 0xff // no varint ends: the first read fails
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := (&walkIndex{}).decode(b)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("decoded")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d MiB file allocated %d MiB in decode", len(b)>>20, alloc>>20)
	if alloc > 4*uint64(len(b)) {
		t.Errorf("a %d MiB file that fails at its first entry allocated %d MiB: size the map from what was read, not what was claimed", len(b)>>20, alloc>>20)
	}
}

func FuzzCacheFilesDecode(f *testing.F) {
	f.Add((&walkIndex{Root: "/w", Dirs: map[string]dirMark{"a": {1, 2}}, Watch: map[string]bool{"b": true}, Creds: map[string]string{"c": "d"}}).encode())
	f.Add((&searchCache{Root: "/w", Dirs: map[string]dirMark{"": {1, 2}}, Found: []Found{{Rel: "x", SameAs: "y"}}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		(&walkIndex{}).decode(b)
		(&searchCache{}).decode(b)
	})
}
