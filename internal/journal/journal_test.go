package journal

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// Only a clean path under /sys/fs/cgroup whose last name is one the
// writer would have made (cordon-PID-N, its own pid) is cordon's: one a
// sandbox wrote into a journal directory its view holds names nothing
// else, and the parent of a cgroup least of all.
func TestOurs(t *testing.T) {
	for _, c := range []struct {
		dir string
		ok  bool
	}{
		{"/sys/fs/cgroup/pids/cordon-42-123", true},
		{"/sys/fs/cgroup/user.slice/app.slice/cordon-42-9", true},
		{"/sys/fs/cgroup/pids/cordon-42-123/..", false},
		{"/sys/fs/cgroup/pids/cordon-42-123/.", false},
		{"/sys/fs/cgroup/pids/cordon-42-123/", false},
		{"/sys/fs/cgroup/pids//cordon-42-123", false},
		{"/sys/fs/cgroup/pids/cordon-43-123", false},
		{"/sys/fs/cgroup/pids/cordon-42-", false},
		{"/sys/fs/cgroup/pids/cordon-42-1x", false},
		{"/sys/fs/cgroup/system.slice/cordon-serve.service", false},
		{"/sys/fs/cgroup/pids/cordon-42-1/../../user.slice", false},
		{"/sys/fs/cgroup/../../tmp/cordon-42-1", false},
		{"/tmp/cordon-42-1", false},
	} {
		if got := ours([]string{c.dir}, 42); got != c.ok {
			t.Errorf("ours(%q) = %v, want %v", c.dir, got, c.ok)
		}
	}
}

// A journal directory is read only when it is the user's own and closed
// to others, and in it only the user's own regular files of one name:
// links, FIFOs (which a sweep must not wait on) and hard links are passed
// over, and stay.
func TestSweepReadsOnlyTheUsersOwn(t *testing.T) {
	line := `{"id":"1","cgroups":["/sys/fs/cgroup/pids/cordon-999999999-1"]}` + "\n"

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "999999999-1-1.jsonl"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Sweep(dir, time.Now()); err == nil || !strings.Contains(err.Error(), "not a directory of this user's own") {
		t.Errorf("a directory others may write: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "999999999-1-1.jsonl")); err != nil {
		t.Errorf("a file in a directory others may write was swept: %v", err)
	}

	dir = t.TempDir()
	other := filepath.Join(t.TempDir(), "999999999-1-2.jsonl")
	os.WriteFile(other, []byte(line), 0o600)
	os.Symlink(other, filepath.Join(dir, "999999999-1-3.jsonl"))
	os.Link(other, filepath.Join(dir, "999999999-1-4.jsonl"))
	if err := syscall.Mkfifo(filepath.Join(dir, "999999999-1-5.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		mine := filepath.Join(dir, "999999999-1-6.jsonl")
		os.WriteFile(mine, []byte(line), 0o600)
		os.Chown(mine, 65534, 65534)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if left, err := Sweep(dir, time.Now()); len(left) != 0 || err != nil {
			t.Errorf("swept %+v %v", left, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep hangs")
	}
	ents, _ := os.ReadDir(dir)
	if want := 3 + map[bool]int{true: 1}[os.Geteuid() == 0]; len(ents) != want {
		t.Errorf("%d files left, want %d", len(ents), want)
	}
}

// A sweep never takes the lock of a file its writer is making: the
// writer does not fail for it.
func TestSweepWhileOpening(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				Sweep(dir, time.Now())
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 2000; i++ {
		j := &Journal{dir: dir, live: map[string][][]byte{}}
		id := j.New()
		if err := j.Placeholder(id, "x"); err != nil {
			t.Fatalf("after %d files: %v", i, err)
		}
		j.Done(id)
	}
}

// A process whose sandboxes are never all done at once (cordon serve
// keeps some alive) does not grow its file without bound: it is made
// again with the records of those not done, which a sweep still finds.
func TestJournalCompacts(t *testing.T) {
	dir := t.TempDir()
	j := &Journal{dir: dir, live: map[string][][]byte{}}
	kept := j.New()
	j.Cgroups(kept, []string{"/sys/fs/cgroup/pids/cordon-999999999-1"})
	token := strings.Repeat("x", 200)
	for i := 0; i < 20000; i++ {
		id := j.New()
		j.Placeholder(id, token)
		j.Placeholder(id, token)
		j.Done(id)
	}
	last := j.New()
	j.Placeholder(last, token)
	files, _ := os.ReadDir(dir)
	if len(files) != 1 {
		t.Fatalf("files: %v", files)
	}
	f, err := os.Open(filepath.Join(dir, files[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Size() > 2*compactAt {
		t.Errorf("the file is %d bytes after 20000 sandboxes done", st.Size())
	}
	sandboxes, err := read(f)
	if err != nil || len(sandboxes) != 2 || len(sandboxes[0].cgroups) != 1 || len(sandboxes[1].placeholders) != 1 {
		t.Errorf("read back %+v %v; want the sandbox kept and the last", sandboxes, err)
	}
	j.Done(kept)
	j.Done(last)
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("all done, files stayed: %v", files)
	}
}
