package journal

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/protect"
)

// The role the test binary plays in TestSweepAfterKilledProcess.
const (
	roleEnv = "CORDON_TEST_JOURNAL_ROLE"
	rootEnv = "CORDON_TEST_JOURNAL_ROOT"
	dirEnv  = "CORDON_TEST_JOURNAL_DIR"
)

// TestRole is not a test: it is the test binary as a cordon that makes a
// workspace's placeholders, each in its journal as it is made, then waits
// to be killed.
func TestRole(t *testing.T) {
	if os.Getenv(roleEnv) != "cordon" {
		t.Skip("only a role of TestSweepAfterKilledProcess")
	}
	j := Process(os.Getenv(dirEnv))
	id := j.New()
	if _, err := protect.Make(os.Getenv(rootEnv), protect.Options{Made: func(tok string) error { return j.Placeholder(id, tok) }}); err != nil {
		panic(err)
	}
	os.Stdout.WriteString("ready\n")
	select {}
}

// A process killed while its placeholders are in place leaves them, and
// its journal names them; the next sweep removes them and the journal
// file, and a second sweep finds nothing.
func TestSweepAfterKilledProcess(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRole$")
	cmd.Env = append(os.Environ(), roleEnv+"=cordon", rootEnv+"="+root, dirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the role did not start: %q", line)
	}
	// Alive, its file is not swept.
	if left, err := Sweep(dir, time.Now()); err != nil || len(left) != 0 {
		t.Fatalf("a live process's journal was swept: %v %v", left, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Lstat(filepath.Join(root, ".vscode")); err != nil {
		t.Fatalf("no placeholder was made: %v", err)
	}
	pending, err := Pending(dir)
	if err != nil || len(pending) != 1 || pending[0].Placeholders == 0 {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	left, err := Sweep(dir, time.Now().Add(time.Second))
	if err != nil || len(left) != 1 {
		t.Fatalf("sweep: %+v %v", left, err)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 0 {
		t.Errorf("left in the workspace: %v", ents)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("the journal file stayed: %v", files)
	}
	if left, err := Sweep(dir, time.Now()); err != nil || len(left) != 0 {
		t.Errorf("a second sweep: %+v %v", left, err)
	}
}

// A file no process holds is read as it is: cgroups not cordon's are
// not acted on, a line cut short is what was not made, and a sandbox done
// is not swept.
func TestSweepActsOnlyOnWhatCordonNames(t *testing.T) {
	dir := t.TempDir()
	victim := t.TempDir()
	lines := `{"id":"1","cgroups":["` + victim + `"]}
{"id":"2","cgroups":["/sys/fs/cgroup/pids/../../../` + strings.TrimPrefix(victim, "/") + `/cordon-1"]}
{"id":"3","cgroups":["/sys/fs/cgroup/pids/cordon-gone-1"]}
{"id":"3","done":true}
{"id":"4","cgroups":["/sys/fs/cgro`
	if err := os.WriteFile(filepath.Join(dir, "999999999-1-1.jsonl"), []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	left, err := Sweep(dir, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("swept %+v; want nothing (no cgroup of these is cordon's, 3 is done, 4 cut short)", left)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("a directory not cordon's was removed: %v", err)
	}
}

// Once every sandbox of the process is done, its file goes; a sandbox
// that recorded nothing writes nothing.
func TestJournalFileGoesWhenDone(t *testing.T) {
	dir := t.TempDir()
	j := Process(dir)
	quiet := j.New()
	j.Done(quiet)
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("a sandbox with no records made a file: %v", files)
	}
	a, b := j.New(), j.New()
	j.Cgroups(a, []string{"/sys/fs/cgroup/pids/cordon-x"})
	j.Placeholder(b, "t")
	j.Done(a)
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("with b not done: %v", files)
	}
	j.Done(b)
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("all done, the file stayed: %v", files)
	}
}
