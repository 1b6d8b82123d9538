//go:build linux

package changes

import (
	"fmt"
	"os"
	"testing"
)

// BenchmarkApply10k applies a set of 10,000 small new files in 100
// directories.
func BenchmarkApply10k(b *testing.B) {
	e := newEnv(b)
	e.start()
	for i := range 10000 {
		write(b, fmt.Sprintf("%s/d%02d/f%04d.txt", e.upper, i%100, i), fmt.Sprintf("file %d\n", i), 0o644)
	}
	s := e.mustCapture(b)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		must(b, os.RemoveAll(e.host))
		must(b, os.Mkdir(e.host, 0o755))
		b.StartTimer()
		rep, err := Apply(s, e.state, nil, ApplyOptions{})
		must(b, err)
		if len(rep.Applied) != 10100 {
			b.Fatalf("applied %d", len(rep.Applied))
		}
	}
}
