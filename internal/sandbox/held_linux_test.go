package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startHolding starts script with sh, with f as its descriptor 3.
func startHolding(t *testing.T, f *os.File, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// Only a process holding a pipe open for writing keeps its reader from
// the end of file: one that reopened it for reading is no holder.
func TestHoldersAreWriters(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	id, err := pipeOf(r)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// Each holder is below a shell that holds nothing, as a sandbox's
	// processes are below its init.
	for _, tt := range []struct {
		name string
		f    *os.File
		held bool
	}{{"writer", w, true}, {"reader", reader, false}} {
		root := startHolding(t, tt.f, "sleep 100 & wait")
		for i := 0; i < 1000 && !sleeping(root.Process.Pid); i++ {
			time.Sleep(10 * time.Millisecond) // the child is on its way
		}
		hs := findHolders(root.Process.Pid, [2]pipeID{noPipe, id})
		if got := len(hs) == 1 && hs[0].streams[1] && !hs[0].streams[0]; got != tt.held {
			t.Errorf("%s: holders %+v, want held %v", tt.name, hs, tt.held)
		}
		if tt.held && !strings.HasPrefix(heldBy(hs), `process `) || tt.held && !strings.Contains(heldBy(hs), ` "sleep", outside the command's process group, still holds its stderr open`) {
			t.Errorf("%s: %q does not name the holder", tt.name, heldBy(hs))
		}
	}
}

// sleeping reports whether pid's child runs sleep.
func sleeping(pid int) bool {
	kids := childrenOf(pid)
	if len(kids) == 0 {
		return false
	}
	_, _, name := describeProcess(kids[0])
	return name == "sleep"
}
