package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// binDir holds the cordon binary the scripts run: the real static binary,
// built once, so that the tests exercise exactly what users run.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cordon-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The rootless scripts run cordon as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "cordon"), "github.com/cordon-sandbox/cordon/cmd/cordon")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cordon:", err)
		return 1
	}
	binDir = dir
	return m.Run()
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			e.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			e.Setenv("CORDON", filepath.Join(binDir, "cordon"))
			e.Setenv("HOSTNAME_OUTSIDE", hostname())
			// Let the rootless scripts' other user reach the work directory.
			if os.Geteuid() == 0 {
				for _, d := range []string{filepath.Dir(e.WorkDir), e.WorkDir} {
					if err := os.Chmod(d, 0o755); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "sandbox":
				// Whether this host can run cordon sandboxes at all.
				return exec.Command(filepath.Join(binDir, "cordon"), "doctor").Run() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"owner":   cmdOwner,
			"running": cmdRunning,
		},
	})
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// owner PATH UID: the file's owner on the host is UID.
func cmdOwner(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: owner PATH UID")
	}
	fi, err := os.Lstat(ts.MkAbs(args[0]))
	ts.Check(err)
	uid := fi.Sys().(*syscall.Stat_t).Uid
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	if (uid == uint32(want)) == neg {
		ts.Fatalf("%s is owned by %d; want %s%d", args[0], uid, strings.Repeat("not ", btoi(neg)), want)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// running [-gone] ARG...: within ten seconds, a process whose command line is
// exactly ARG... exists (or, negated, none does).
func cmdRunning(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: running ARG...")
	}
	want := strings.Join(args, "\x00") + "\x00"
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range pids {
			if b, err := os.ReadFile(p); err == nil && string(b) == want {
				found = true
				break
			}
		}
		if found != neg {
			return
		}
		if time.Now().After(deadline) {
			if neg {
				ts.Fatalf("%q still running after 10s", strings.Join(args, " "))
			}
			ts.Fatalf("%q not running after 10s", strings.Join(args, " "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
