package sandbox_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// BenchmarkBoxExec runs /bin/true in a kept-alive sandbox through the Go
// API in the same process (sandbox.Box.Exec: what cordon serve does for a
// claimed sandbox, without HTTP and without the audit log), interleaved
// with a bare fork/exec of /bin/true, and reports both medians and their
// ratio.
func BenchmarkBoxExec(b *testing.B) {
	box, _ := startBox(b)
	ctx := context.Background()
	var bare, boxed []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
		start = time.Now()
		o, err := box.Exec(ctx, sandbox.ExecOptions{Args: []string{"/bin/true"}})
		if err != nil || o.ExitCode != 0 {
			b.Fatalf("exec: %v, %+v", err, o)
		}
		boxed = append(boxed, time.Since(start))
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(med(bare), "bare-µs")
	b.ReportMetric(med(boxed), "box-µs")
	b.ReportMetric(med(boxed)/med(bare), "box/bare")
}
