package du

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWalk walks DU_BENCH_DIR (a tree of one's choosing).
func BenchmarkWalk(b *testing.B) {
	dir := os.Getenv("DU_BENCH_DIR")
	if dir == "" {
		b.Skip("DU_BENCH_DIR not set")
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	b.ReportAllocs()
	var u Use
	for b.Loop() {
		u, _ = Walk(fd, Bound{})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(u.Inodes), "ns/entry")
}
