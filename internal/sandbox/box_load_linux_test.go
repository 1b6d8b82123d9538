package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// loadEnv scales TestOutputUnderLoad: N runs N times its commands and
// sandboxes (1: 1024 commands over 64 sandboxes).
const loadEnv = "CORDON_TEST_OUTPUT_LOAD"

// outputSizes are the sizes of output the commands of the load test write,
// in turn: nothing, a few bytes, one more than a pipe holds, a mebibyte.
var outputSizes = []int{0, 5, 65537, 1 << 20}

// pattern is what command n writes to stdout: its token, repeated, cut at
// size bytes.
func pattern(n, size int) []byte {
	token := fmt.Sprintf("<command %d>\n", n)
	return bytes.Repeat([]byte(token), size/len(token)+1)[:size]
}

// Under load (sandboxes built and ended all along, commands running side
// by side in others, each writing output of several sizes), every command
// answers with every byte of its output, and its digest on stderr.
func TestOutputUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	scale := 1
	if v := os.Getenv(loadEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", loadEnv, v)
		}
		scale = n
	}
	sandboxes, commands, perBox := 64*scale, 1024*scale, 2 // commands at once in a sandbox
	exe := cordon(t)
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	start := func(i int) (*sandbox.Box, error) {
		p := profile.Default()
		p.Workspace.Path = fmt.Sprintf("%s/%d", ws, i)
		if err := os.Mkdir(p.Workspace.Path, 0o777); err != nil {
			return nil, err
		}
		os.Chmod(p.Workspace.Path, 0o777)
		if err := p.SetLimit("wall", "5m"); err != nil { // against a hang
			return nil, err
		}
		return sandbox.Start(sandbox.Options{Profile: p, Exe: exe, Cwd: p.Workspace.Path, LookupEnv: os.LookupEnv})
	}
	first, err := start(0)
	if err != nil {
		t.Skipf("this host cannot build sandboxes: %v", err)
	}
	first.Close()

	began := time.Now()
	var next atomic.Int64 // the next workspace
	next.Store(1)
	// Sandboxes built and ended all along, beside the commands.
	stop := make(chan struct{})
	var churn sync.WaitGroup
	var churned atomic.Int64
	for range 4 {
		churn.Add(1)
		go func() {
			defer churn.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				box, err := start(int(next.Add(1)))
				if err != nil {
					t.Errorf("building a sandbox beside the commands: %v", err)
					return
				}
				box.Exec(context.Background(), sandbox.ExecOptions{Args: []string{"true"}})
				box.Close()
				churned.Add(1)
			}
		}()
	}

	var mu sync.Mutex
	var failures []string
	var bytesChecked atomic.Int64
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range sandboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			box, err := start(int(next.Add(1)))
			if err != nil {
				fail("building a sandbox: %v", err)
				for range work { // the others take its share
				}
				return
			}
			defer box.Close()
			var inBox sync.WaitGroup
			for range perBox {
				inBox.Add(1)
				go func() {
					defer inBox.Done()
					for n := range work {
						size := outputSizes[n%len(outputSizes)]
						want := pattern(n, size)
						script := fmt.Sprintf(`t='<command %d>'; yes "$t" | head -c %d; yes "$t" | head -c %d | sha256sum >&2`, n, size, size)
						var stdout, stderr bytes.Buffer
						o, err := box.Exec(context.Background(), sandbox.ExecOptions{Args: []string{"sh", "-c", script}, Stdout: &stdout, Stderr: &stderr})
						digest := fmt.Sprintf("%x  -\n", sha256.Sum256(want))
						switch {
						case err != nil:
							fail("command %d: %v", n, err)
						case !bytes.Equal(stdout.Bytes(), want):
							fail("command %d: %d bytes of stdout, want %d (%s), notes %q", n, stdout.Len(), size, firstDifference(stdout.Bytes(), want), o.Notes)
						case stderr.String() != digest:
							fail("command %d: stderr %q, want the digest %q, notes %q", n, stderr.String(), digest, o.Notes)
						case o.Status != outcome.OK || len(o.Notes) > 0:
							fail("command %d: %s, notes %q", n, o.Status, o.Notes)
						default:
							bytesChecked.Add(int64(stdout.Len() + stderr.Len()))
						}
					}
				}()
			}
			inBox.Wait()
		}()
	}
	for n := range commands {
		work <- n
	}
	close(work)
	wg.Wait()
	close(stop)
	churn.Wait()
	t.Logf("%d commands over %d sandboxes, %d more sandboxes built and ended beside them, %d bytes checked, in %s",
		commands, sandboxes, churned.Load(), bytesChecked.Load(), time.Since(began).Round(time.Second))
	if len(failures) > 0 {
		t.Fatalf("%d of %d commands failed: %s", len(failures), commands, strings.Join(failures[:min(len(failures), 10)], "; "))
	}
}

// firstDifference says where got first differs from want.
func firstDifference(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d", i)
		}
	}
	return fmt.Sprintf("equal over the first %d bytes", min(len(got), len(want)))
}
