package drift

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	old := State{Namespaces: map[string]string{"net": "net:[1]", "mnt": "mnt:[2]"}, Mounts: "aaaa", Limits: map[string]string{"pids.max": "64", "memory.max": "1024"}, Profile: "p1"}
	if got := Compare(old, old); len(got) != 0 {
		t.Errorf("no change: %v", got)
	}
	now := State{Namespaces: map[string]string{"net": "net:[9]", "mnt": "mnt:[2]"}, Mounts: "bbbb", Limits: map[string]string{"pids.max": "max"}, Profile: "p2"}
	got := strings.Join(Compare(old, now), "\n")
	for _, want := range []string{
		"init's net namespace changed (net:[1], now net:[9])",
		"the mount table changed",
		"the cgroup limit memory.max changed (1024, now gone)",
		"the cgroup limit pids.max changed (64, now max)",
		"the profile file changed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestCaptureAndDescendants(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.yaml")
	os.WriteFile(prof, []byte("version: 1\n"), 0o644)
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	for range 100 {
		if len(Descendants(pid)) > 0 {
			break
		}
		exec.Command("sleep", "0.01").Run()
	}
	if len(Descendants(pid)) != 1 {
		t.Fatalf("descendants of the shell: %v", Descendants(pid))
	}
	rules := "allow api.example.com:443"
	src := Sources{Limits: func() (map[string]string, error) { return map[string]string{"pids.max": "64"}, nil }, ProfileFile: prof,
		Egress: func() []byte { return []byte(rules) }}
	s, err := Capture(pid, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Namespaces) != len(namespaces) || s.Mounts == "" || s.Profile == "" {
		t.Fatalf("state: %+v", s)
	}
	os.WriteFile(prof, []byte("version: 1\nagent: edited\n"), 0o644)
	now, _ := Capture(pid, src)
	if c := Compare(s, now); len(c) != 1 || !strings.Contains(c[0], "profile file changed") {
		t.Errorf("after an edit: %v", c)
	}
	rules += ", allow 0.0.0.0/0"
	now2, _ := Capture(pid, src)
	if c := Compare(now, now2); len(c) != 1 || !strings.Contains(c[0], "egress rules in force changed") {
		t.Errorf("after the rules grew: %v", c)
	}
	// The test's own processes are not confined: each is named.
	if u := Unconfined(pid, s.Namespaces); len(u) == 0 || !strings.Contains(u[0], "without its seccomp filter") {
		t.Errorf("unconfined: %v", u)
	}
	if Confined(pid) {
		t.Error("an unconfined child counted as confined")
	}
}

// A read-only bind that the kernel detached from a read-only mount (the
// host replaced the file) is no drift; one detached from a writable mount
// (a protected path of the workspace), or any mount added or changed, is.
func TestMountsDetached(t *testing.T) {
	base := "1 0 0:1 / / ro,nosuid - tmpfs tmpfs ro\n" +
		"2 1 8:1 /etc/resolv.conf /etc/resolv.conf ro,nosuid - ext4 /dev/vda ro\n" +
		"3 1 8:1 /work /work rw,nosuid - ext4 /dev/vda rw\n" +
		"4 3 8:1 /work/.git/config /work/.git/config ro,nosuid - ext4 /dev/vda rw\n"
	state := func(mi string) State { return State{Mounts: digest([]byte(mi)), mountLines: parseMounts([]byte(mi))} }
	drop := func(id string) string {
		var out []string
		for _, l := range strings.SplitAfter(base, "\n") {
			if l != "" && !strings.HasPrefix(l, id+" ") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "")
	}
	for _, tt := range []struct {
		name  string
		now   string
		drift bool
	}{
		{"unchanged", base, false},
		{"resolv.conf replaced on the host", drop("2"), false},
		{"the workspace's .git/config replaced on the host", drop("4"), true},
		{"ld.so.cache replaced on the host, its old file kept", strings.Replace(base, "/etc/resolv.conf /etc/resolv.conf", "/etc/resolv.conf//deleted /etc/resolv.conf", 1), false},
		{"the workspace's .git/config deleted on the host", strings.Replace(base, "/work/.git/config /work/.git/config", "/work/.git/config//deleted /work/.git/config", 1), true},
		{"a file deleted and its mount made writable", strings.Replace(base, "/etc/resolv.conf /etc/resolv.conf ro,nosuid", "/etc/resolv.conf//deleted /etc/resolv.conf rw,nosuid", 1), true},
		{"another root", strings.Replace(base, "/etc/resolv.conf /etc/resolv.conf", "/etc/shadow /etc/resolv.conf", 1), true},
		{"a mount added", base + "5 3 0:9 / /work/x rw - tmpfs tmpfs rw\n", true},
		{"a mount made writable", strings.Replace(base, "/etc/resolv.conf ro,nosuid", "/etc/resolv.conf rw,nosuid", 1), true},
	} {
		got := Compare(state(base), state(tt.now))
		if (len(got) > 0) != tt.drift {
			t.Errorf("%s: got %q, want drift %v", tt.name, got, tt.drift)
		}
	}
}
