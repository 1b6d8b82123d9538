package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/cleanup"
)

// The roles the test binary plays in TestCleanupAfterKilledCordon.
const (
	roleEnv   = "CORDON_TEST_CLEANUP_ROLE"
	rootEnv   = "CORDON_TEST_CLEANUP_ROOT"
	tokensEnv = "CORDON_TEST_CLEANUP_TOKENS"
)

// TestCleanupRole is not a test: it is the test binary as a cordon that
// dies slowly, or as its cleanup helper, for TestCleanupAfterKilledCordon.
func TestCleanupRole(t *testing.T) {
	switch os.Getenv(roleEnv) {
	case "helper":
		cleanup.Main(append([]string{"--"}, strings.Split(os.Getenv(tokensEnv), "\n")...))
		os.Exit(0)
	case "cordon", "cordon-without-pidfd":
		dyingCordon(os.Getenv(roleEnv) == "cordon")
		os.Exit(0)
	}
	t.Skip("only a role of TestCleanupAfterKilledCordon")
}

// dyingCordon makes the placeholders of a workspace and starts a cleanup
// helper as cordon does, then, told to die, closes the helper's pipe first
// and its placeholders' locks a while later, as a killed cordon closing
// its files one by one may.
func dyingCordon(pidfd bool) {
	p, err := protect.Make(os.Getenv(rootEnv), protect.Options{})
	if err != nil {
		panic(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	files := cleanupFiles(r)
	if !pidfd {
		closeAll(files[3:])
		files = files[:3]
	}
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestCleanupRole$")
	cmd.Env = append(os.Environ(), roleEnv+"=helper", tokensEnv+"="+strings.Join(p.Tokens(), "\n"))
	cmd.Stdin = r
	cmd.ExtraFiles = files[3:]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	r.Close()
	os.Stdout.WriteString("ready\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
	w.Close()
	time.Sleep(500 * time.Millisecond)
}

// A cordon killed while its sandbox runs leaves no placeholder, however
// its files close: the cleanup helper waits for cordon to be gone before it
// takes the placeholders away. Without cordon's pidfd, the helper finds
// the placeholders still locked, and leaves them.
func TestCleanupAfterKilledCordon(t *testing.T) {
	if os.Getenv(roleEnv) != "" {
		t.Skip("a role")
	}
	for _, tt := range []struct {
		role string
		left bool
	}{{"cordon", false}, {"cordon-without-pidfd", true}} {
		t.Run(tt.role, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, ".git", "hooks"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestCleanupRole$")
			cmd.Env = append(os.Environ(), roleEnv+"="+tt.role, rootEnv+"="+root)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
				cmd.Wait()
				t.Fatalf("the cordon of the test did not start: %q", line)
			}
			vscode := filepath.Join(root, ".vscode")
			if _, err := os.Lstat(vscode); err != nil {
				t.Fatalf("no placeholder was made: %v", err)
			}
			in.Write([]byte("die\n"))
			cmd.Wait()
			// The helper is not this test's child: wait for the placeholder
			// to go, or for the helper to have had ample time.
			for i := 0; i < 100; i++ {
				if _, err := os.Lstat(vscode); err != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			_, err = os.Lstat(vscode)
			if left := err == nil; left != tt.left {
				t.Errorf("placeholder left: %v, want %v", left, tt.left)
			}
		})
	}
}
