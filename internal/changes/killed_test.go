//go:build linux

package changes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An apply killed with SIGKILL, with a file written under its temporary
// name or just renamed into place, leaves each file old or new, and a
// second apply finishes the job.
func TestApplyKilled(t *testing.T) {
	for _, tc := range []struct {
		after  int
		placed bool
	}{{13, false}, {5, true}, {3, false}} {
		t.Run(fmt.Sprintf("after%d-placed%v", tc.after, tc.placed), func(t *testing.T) {
			e := newEnv(t)
			olds, news := map[string]string{}, map[string]string{}
			for i := range 10 {
				p := fmt.Sprintf("m%02d", i)
				olds[p] = strings.Repeat(fmt.Sprintf("old %d\n", i), 10000)
				write(t, e.host+"/"+p, olds[p], 0o644)
			}
			e.start()
			for i := range 10 {
				p := fmt.Sprintf("m%02d", i)
				news[p] = strings.Repeat(fmt.Sprintf("new %d\n", i), 12000)
				write(t, e.upper+"/"+p, news[p], 0o644)
				p = fmt.Sprintf("d/a%02d", i)
				news[p] = strings.Repeat(fmt.Sprintf("added %d\n", i), 9000)
				write(t, e.upper+"/"+p, news[p], 0o600)
			}
			s := e.mustCapture(t)

			cmd := exec.Command(os.Args[0], "-test.run=^TestApplyKilledHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CHANGES_KILL_STATE="+e.state,
				"CHANGES_KILL_AFTER="+strconv.Itoa(tc.after), "CHANGES_KILL_PLACED="+strconv.FormatBool(tc.placed))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the apply was not killed: %v\n%s", err, out)
			}
			landed := 0
			for p, n := range news {
				got, err := os.ReadFile(e.host + "/" + p)
				switch {
				case err != nil && olds[p] == "" && os.IsNotExist(err):
				case err != nil:
					t.Errorf("%s: %v", p, err)
				case string(got) == n:
					landed++
				case string(got) != olds[p]:
					t.Errorf("%s: neither old nor new (%d bytes)", p, len(got))
				}
			}
			if landed == 0 || landed == len(news) {
				t.Errorf("%d of %d landed before the kill", landed, len(news))
			}
			if !tc.placed && tc.after > 10 { // a modified file: under a temporary name
				found := false
				for p := range tree(t, e.host, false) {
					found = found || strings.Contains(p, ".cordon-apply-")
				}
				if !found {
					t.Errorf("no temporary file left: the kill came too late")
				}
			}

			l, err := Load(e.state, testRun)
			must(t, err)
			rep, err := Apply(l, e.state, nil, ApplyOptions{})
			must(t, err)
			if len(rep.Conflicts) > 0 || len(rep.Already) == 0 || len(rep.Applied)+len(rep.Already) != len(s.Changes) {
				t.Errorf("second apply: %+v", rep)
			}
			for p, n := range news {
				if got := readString(t, e.host+"/"+p); got != n {
					t.Errorf("%s: not its new content", p)
				}
			}
			leftovers(t, e.host)
		})
	}
}

// TestApplyKilledHelper is the process TestApplyKilled kills.
func TestApplyKilledHelper(t *testing.T) {
	state := os.Getenv("CHANGES_KILL_STATE")
	if state == "" {
		t.Skip("run by TestApplyKilled")
	}
	after, _ := strconv.Atoi(os.Getenv("CHANGES_KILL_AFTER"))
	placed := os.Getenv("CHANGES_KILL_PLACED") == "true"
	s, err := Load(state, testRun)
	must(t, err)
	n := 0
	_, err = Apply(s, state, nil, ApplyOptions{hook: func(_ string, p bool) {
		if p {
			n++
		}
		if n == after && p == placed {
			unix.Kill(os.Getpid(), unix.SIGKILL)
			time.Sleep(time.Minute) // the signal is on its way
		}
	}})
	t.Fatalf("not killed: %v", err)
}
