package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func mkfile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A fake v2 tree: cordon runs in /svc, whose children get controllers.
func TestV2FakeTree(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory pids")
	mkfile(t, filepath.Join(root, "svc", "cgroup.subtree_control"), "memory")
	h := Host{Root: root, Self: []byte("0::/svc\n")}
	if v := h.Version(); v != "v2" {
		t.Fatalf("version %q", v)
	}
	dir := filepath.Join(root, "svc", "cordon-1")
	plan, err := h.Plan("cordon-1")
	if err != nil || len(plan) != 1 || plan[0] != dir {
		t.Fatalf("plan %v, %v; want [%s]", plan, err, dir)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("Plan created the directory")
	}
	g, err := h.New("cordon-1", Limits{MemoryBytes: 128 << 20, Pids: 64, CPUMillicores: 1500})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Paths(); len(got) != 1 || got[0] != dir {
		t.Fatalf("paths %v, want [%s]", got, dir)
	}
	for file, want := range map[string]string{
		"memory.max": "134217728", "memory.oom.group": "1", "pids.max": "64", "cpu.max": "150000 100000",
	} {
		if got := read(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// The missing controllers were enabled for the children of /svc.
	if got := read(t, filepath.Join(root, "svc", "cgroup.subtree_control")); got != "+pids +cpu" {
		t.Errorf("subtree_control write %q", got)
	}
	if f, err := g.Dir(); err != nil || f == nil {
		t.Errorf("Dir: %v, %v; v2 starts processes in the group with CLONE_INTO_CGROUP", f, err)
	} else {
		f.Close()
	}
	if err := g.AddProcess(42); err != nil || read(t, filepath.Join(dir, "cgroup.procs")) != "42" {
		t.Errorf("AddProcess: %v", err)
	}
	mkfile(t, filepath.Join(dir, "memory.peak"), "1000\n")
	mkfile(t, filepath.Join(dir, "memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
	mkfile(t, filepath.Join(dir, "pids.events"), "max 5\n")
	mkfile(t, filepath.Join(dir, "cpu.stat"), "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.MemoryPeak == nil || *s.MemoryPeak != 1000 || s.OOMKills != 1 || s.PidsMaxEvents != 5 || s.CPUUsageNS == nil || *s.CPUUsageNS != 2500000 || *s.CPUUserNS != 2000000 || *s.CPUSystemNS != 500000 || s.PidsPeak != nil {
		t.Errorf("stats %+v", s)
	}
}

func TestV2NotDelegated(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory pids")
	// No cgroup.subtree_control in cordon's own cgroup: nothing delegated.
	os.MkdirAll(filepath.Join(root, "user.slice"), 0o755)
	h := Host{Root: root, Self: []byte("0::/user.slice\n")}
	if _, err := h.New("cordon-1", Limits{Pids: 64}); !errors.Is(err, ErrNotDelegated) {
		t.Fatalf("got %v, want ErrNotDelegated", err)
	}
	if _, err := os.Stat(filepath.Join(root, "user.slice", "cordon-1")); err == nil {
		t.Error("left a directory behind")
	}
}

// A fake v1 tree like this host's: separate hierarchies, cordon in a
// sub-cgroup of the memory hierarchy.
func TestV1FakeTree(t *testing.T) {
	root := t.TempDir()
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		mkfile(t, filepath.Join(root, c, "cgroup.procs"), "")
	}
	os.MkdirAll(filepath.Join(root, "memory", "api", "x"), 0o755)
	self := "8:pids:/\n4:memory:/api/x\n2:cpuacct:/\n1:cpu:/\n0::/\n"
	h := Host{Root: root, Self: []byte(self)}
	if v := h.Version(); v != "v1" {
		t.Fatalf("version %q", v)
	}
	mem := filepath.Join(root, "memory", "api", "x", "cordon-1")
	want := []string{mem, filepath.Join(root, "pids", "cordon-1"), filepath.Join(root, "cpu", "cordon-1"), filepath.Join(root, "cpuacct", "cordon-1")}
	// The directories are known before they exist.
	plan, err := h.Plan("cordon-1")
	if err != nil || strings.Join(plan, " ") != strings.Join(want, " ") {
		t.Fatalf("plan %v, %v; want %v", plan, err, want)
	}
	if _, err := os.Stat(mem); err == nil {
		t.Fatal("Plan created a directory")
	}

	g, err := h.New("cordon-1", Limits{MemoryBytes: 64 << 20, Pids: 32, CPUMillicores: 500})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Paths(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %v, want %v", got, want)
	}
	for file, want := range map[string]string{
		"memory/api/x/cordon-1/memory.limit_in_bytes": "67108864",
		"pids/cordon-1/pids.max":                      "32",
		"cpu/cordon-1/cpu.cfs_period_us":              "100000",
		"cpu/cordon-1/cpu.cfs_quota_us":               "50000",
	} {
		if got := read(t, filepath.Join(root, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if err := g.AddProcess(7); err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		if read(t, filepath.Join(d, "cgroup.procs")) != "7" {
			t.Errorf("%s: process not added", d)
		}
	}
	mkfile(t, filepath.Join(mem, "memory.max_usage_in_bytes"), "4096")
	mkfile(t, filepath.Join(mem, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	mkfile(t, filepath.Join(root, "pids", "cordon-1", "pids.events"), "max 0\n")
	mkfile(t, filepath.Join(root, "pids", "cordon-1", "pids.peak"), "9")
	mkfile(t, filepath.Join(root, "cpuacct", "cordon-1", "cpuacct.usage"), "123")
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if *s.MemoryPeak != 4096 || s.OOMKills != 2 || *s.PidsPeak != 9 || *s.CPUUsageNS != 123 {
		t.Errorf("stats %+v", s)
	}
}

func TestV1MissingController(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "memory", "cgroup.procs"), "")
	h := Host{Root: root, Self: []byte("4:memory:/\n")}
	if _, err := h.New("c", Limits{Pids: 10}); !errors.Is(err, ErrNotDelegated) {
		t.Fatalf("got %v, want ErrNotDelegated for the missing pids controller", err)
	}
	if _, err := os.Stat(filepath.Join(root, "memory", "c")); err == nil {
		t.Error("left the memory directory behind")
	}
}

func TestBadNames(t *testing.T) {
	h := Host{Root: t.TempDir()}
	for _, n := range []string{"", ".", "..", "a/b"} {
		if _, err := h.New(n, Limits{}); err == nil {
			t.Errorf("name %q accepted", n)
		}
		if _, err := h.Plan(n); err == nil {
			t.Errorf("name %q planned", n)
		}
	}
}

// The real hierarchy of this host, when cordon may use it.
func TestRealGroup(t *testing.T) {
	g := realGroup(t, "", Limits{MemoryBytes: 64 << 20, Pids: 32, CPUMillicores: 500})
	defer g.Remove()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := g.AddProcess(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.PidsPeak != nil && *s.PidsPeak < 1 {
		t.Errorf("process not counted: %+v", s)
	}
	if s.MemoryPeak == nil || s.CPUUsageNS == nil {
		t.Errorf("memory or CPU not measured: %+v", s)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The group empties once the kill lands; then it can be removed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = g.Remove()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("remove: %v", err)
	}
	for _, p := range g.Paths() {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}

func TestV2Evacuate(t *testing.T) {
	parent := t.TempDir()
	mkfile(t, filepath.Join(parent, "cgroup.procs"), "4242\n")
	if err := evacuate(parent, 4242); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(parent, SupervisorLeaf, "cgroup.procs")); got != "4242" {
		t.Errorf("moved %q, want 4242", got)
	}
	// Another process in the cgroup: cordon does not move it, and says so.
	mkfile(t, filepath.Join(parent, "cgroup.procs"), "4242\n99\n")
	if err := evacuate(parent, 4242); err == nil || !strings.Contains(err.Error(), "other processes") {
		t.Errorf("got %v, want a refusal", err)
	}
}

// A cordon that moved into its supervisor leaf makes its groups where it
// made them before, beside the leaf: not below it, one level deeper each
// time.
func TestV2SupervisorLeafIsHome(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory pids")
	mkfile(t, filepath.Join(root, "user", "cgroup.subtree_control"), "cpu memory pids")
	mkfile(t, filepath.Join(root, "user", SupervisorLeaf, "cgroup.procs"), "4242\n")
	h := Host{Root: root, Self: []byte("0::/user/" + SupervisorLeaf + "\n")}
	want := filepath.Join(root, "user", "cordon-1")
	if plan, err := h.Plan("cordon-1"); err != nil || len(plan) != 1 || plan[0] != want {
		t.Fatalf("plan %v, %v; want [%s]", plan, err, want)
	}
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "user", SupervisorLeaf, "cgroup.subtree_control")); err == nil {
		t.Error("Prepare enabled controllers below the supervisor leaf")
	}
	g, err := h.New("cordon-1", Limits{Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Paths(); len(got) != 1 || got[0] != want {
		t.Errorf("paths %v, want [%s]", got, want)
	}
}

func TestHome(t *testing.T) {
	for in, want := range map[string]string{
		"/":                                "/",
		"/user.slice/u.service":            "/user.slice/u.service",
		"/" + SupervisorLeaf:               "/",
		"/a/b/" + SupervisorLeaf:           "/a/b",
		"/a/" + SupervisorLeaf + "x":       "/a/" + SupervisorLeaf + "x",
		"/a/" + SupervisorLeaf + "/cordon": "/a/" + SupervisorLeaf + "/cordon",
	} {
		if got := Home(in); got != want {
			t.Errorf("Home(%q) = %q, want %q", in, got, want)
		}
	}
}

// Prepare enables the controllers for the children of cordon's cgroup
// before New, so that nothing cordon starts in between keeps it from
// leaving a cgroup it holds alone; on v1 it does nothing.
func TestPrepare(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory pids")
	mkfile(t, filepath.Join(root, "svc", "cgroup.subtree_control"), "")
	h := Host{Root: root, Self: []byte("0::/svc\n")}
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "svc", "cgroup.subtree_control")); got != "+memory +pids +cpu" {
		t.Errorf("subtree_control write %q", got)
	}
	// Not delegated: Prepare says so as New does.
	os.Remove(filepath.Join(root, "svc", "cgroup.subtree_control"))
	if err := h.Prepare(); !errors.Is(err, ErrNotDelegated) {
		t.Errorf("got %v, want ErrNotDelegated", err)
	}
	v1 := t.TempDir()
	mkfile(t, filepath.Join(v1, "memory", "cgroup.procs"), "")
	if err := (Host{Root: v1, Self: []byte("4:memory:/\n")}).Prepare(); err != nil {
		t.Errorf("v1: %v", err)
	}
}

// On v1, a process started with StartIn begins in the group, and none of
// the test's own threads is left there.
func TestRealStartIn(t *testing.T) {
	g := realGroup(t, "v1", Limits{Pids: 32})
	defer g.Remove()
	cmd := exec.Command("sleep", "60")
	ran, err := g.StartIn(cmd.Start)
	if err != nil || !ran {
		t.Fatalf("StartIn: ran %v, %v", ran, err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		for i := 0; i < 500 && g.Remove() != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	want := strconv.Itoa(cmd.Process.Pid)
	for _, d := range g.Paths() {
		for _, file := range []string{"cgroup.procs", "tasks"} {
			if got := strings.Fields(read(t, filepath.Join(d, file))); len(got) != 1 || got[0] != want {
				t.Errorf("%s/%s lists %v; want only the child, %s", d, file, got, want)
			}
		}
	}
}

// realGroup makes a group in this host's hierarchy (of version, when not
// empty), or skips the test where there is none cordon may use.
func realGroup(t *testing.T, version string, l Limits) Group {
	t.Helper()
	h, err := System()
	if err != nil {
		t.Skip(err)
	}
	if version != "" && h.Version() != version {
		t.Skipf("no %s hierarchy here", version)
	}
	g, err := h.New(fmt.Sprintf("cordon-test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid()), l)
	if errors.Is(err, ErrNotDelegated) {
		t.Skipf("no delegated cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The counters are read again, through one descriptor, each time: a value
// read reflects the file as it is then.
func TestCountersRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var c counters
	defer c.close()
	write("pids.current", "7\n")
	write("memory.events", "low 0\nhigh 2\noom_kill 3\n")
	if v := c.optInt(dir, "pids.current"); v == nil || *v != 7 {
		t.Errorf("pids.current: %v, want 7", v)
	}
	if v, err := c.keyed(dir, "memory.events", "oom_kill"); err != nil || v != 3 {
		t.Errorf("oom_kill: %d, %v; want 3", v, err)
	}
	write("pids.current", "9\n")
	write("memory.events", "low 0\nhigh 2\noom_kill 4\n")
	if v := c.optInt(dir, "pids.current"); v == nil || *v != 9 {
		t.Errorf("pids.current read again: %v, want 9", v)
	}
	if v, err := c.keyed(dir, "memory.events", "oom_kill"); err != nil || v != 4 {
		t.Errorf("oom_kill read again: %d, %v; want 4", v, err)
	}
	if v, err := c.keyed(dir, "memory.events", "max"); err != nil || v != 0 {
		t.Errorf("a key the file lacks: %d, %v; want 0", v, err)
	}
	write("pids.current", "max\n")
	if v := c.optInt(dir, "pids.current"); v == nil || *v != -1 {
		t.Errorf("max: %v, want -1", v)
	}
	// Blanks of any kind apart the two fields; a line of three is no
	// counter's, and the key's next line is read.
	write("memory.events", "low 0\noom_kill 3 4\n oom_kill\t 5 \r\n")
	if v, err := c.keyed(dir, "memory.events", "oom_kill"); err != nil || v != 5 {
		t.Errorf("oom_kill apart by a tab: %d, %v; want 5", v, err)
	}
	write("memory.events", "oom_kill x\n")
	if _, err := c.keyed(dir, "memory.events", "oom_kill"); err == nil {
		t.Error("a value that is not a number was read without error")
	}
	if v := c.optInt(dir, "absent"); v != nil {
		t.Errorf("a file the kernel lacks: %d, want none", *v)
	}
}

// Reading a counter file again allocates nothing: the watcher reads them
// every few milliseconds for the whole run, and what it allocated would
// grow an idle cordon's heap.
func TestCountersReadAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 2\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c counters
	defer c.close()
	if _, err := c.keyed(dir, "memory.events", "oom_kill"); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { c.keyed(dir, "memory.events", "oom_kill") }); n != 0 {
		t.Errorf("keyed allocates %v times per read", n)
	}
}
