package cli_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLeanSandboxProgram checks that cordon as build.sh builds it starts
// each sandbox's init from the lean program it carries,
// never from cordon itself.
func TestLeanSandboxProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading the processes' executables needs root")
	}
	ws := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "cordon"), "run", "--workspace", ws, "--", "sh", "-c", "echo ready; read x")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the sandbox did not start: %q; stderr: %s", line, stderr.String())
	}
	roles := map[string]string{} // hidden argument: executable
	pid := strconv.Itoa(cmd.Process.Pid)
	// Each thread lists the children it started.
	tasks, err := filepath.Glob("/proc/" + pid + "/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads of cordon: %v", err)
	}
	var children []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		children = append(children, strings.Fields(string(b))...)
	}
	for _, child := range children {
		argv, err := os.ReadFile("/proc/" + child + "/cmdline")
		if err != nil {
			continue // it has just ended
		}
		args := strings.Split(string(argv), "\x00")
		exe, err := os.Readlink("/proc/" + child + "/exe")
		if err != nil || len(args) < 2 {
			continue
		}
		roles[args[1]] = exe
	}
	for _, role := range []string{"__init"} {
		exe, ok := roles[role]
		if !ok {
			t.Errorf("no %s among cordon's children (%v)", role, roles)
			continue
		}
		// Root's cordon runs the host's shared copy (sandbox.sharedCopy).
		if !strings.HasPrefix(exe, "/run/cordon/sandbox-") {
			t.Errorf("%s runs %s, not the host's shared copy of the lean program", role, exe)
		}
	}
	out, err := exec.Command(filepath.Join(binDir, "cordon"), "doctor", "--json").Output()
	if !bytes.Contains(out, []byte(`"sandbox_program": "lean"`)) {
		t.Errorf("cordon doctor --json does not say the sandbox program is lean (%v):\n%s", err, out)
	}
}
