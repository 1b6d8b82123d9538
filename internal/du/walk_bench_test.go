package du

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWalk walks DU_BENCH_DIR (a tree of one's choosing), alone
// and with two workers.
func BenchmarkWalk(b *testing.B) {
	for _, workers := range []int{0, 2} {
		b.Run(map[int]string{0: "Walk", 2: "WalkParallel-2"}[workers], func(b *testing.B) { benchWalk(b, workers) })
	}
}

func benchWalk(b *testing.B, workers int) {
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
		if workers == 0 {
			u, _ = Walk(fd, Bound{})
		} else {
			u, _ = WalkParallel(fd, workers, Bound{})
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(u.Inodes), "ns/entry")
}
