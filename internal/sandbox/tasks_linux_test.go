package sandbox

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// The counter finds every task under a process, threads included, and
// stops counting past the bound it is given.
func TestTaskCounter(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & sleep 60 & (sleep 60 & wait) & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	tc := &taskCounter{init: cmd.Process.Pid}
	if !tc.counts() {
		t.Skip("this kernel's /proc does not list a task's children")
	}
	// sh, two sleeps, a subshell and its sleep: five single-threaded
	// processes, once all have started.
	var n int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if n, err = tc.count(100); err != nil {
			t.Fatal(err)
		}
		if n >= 5 {
			break
		}
	}
	if n != 5 {
		t.Fatalf("counted %d tasks, want 5", n)
	}
	if n, _ := tc.count(2); n != 3 {
		t.Errorf("count stopped past 2 at %d, want 3", n)
	}

	// A multi-threaded process counts each thread: this test's own.
	self := &taskCounter{init: os.Getpid()}
	threads, err := self.count(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if threads < 2+5 {
		t.Errorf("counted %d tasks under the test process (its threads and the five above), want at least 7", threads)
	}

	cmd.Process.Kill()
	cmd.Wait()
	if _, err := tc.count(100); err == nil {
		t.Error("counting under a process that ended: no error")
	}
}
