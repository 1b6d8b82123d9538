package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cordon-sandbox/cordon/internal/testbin"
)

// binDir holds the cordon binary the scripts run: the real static binary,
// built once, so that the tests exercise exactly what users run.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// prebuiltEnv names a directory holding cordon, cordon-weak and mcpfake,
// built beforehand as buildAndRun builds them, for hosts where building
// them here is slow: a virtual machine under emulation (.ci/vm-cgroup2).
// The MCP TypeScript client is not installed then; its scripts skip.
const prebuiltEnv = "CORDON_TEST_BINDIR"

func buildAndRun(m *testing.M) int {
	if dir := os.Getenv(prebuiltEnv); dir != "" {
		for _, name := range []string{"cordon", "cordon-weak", "mcpfake"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				fmt.Fprintf(os.Stderr, "%s=%s: %v\n", prebuiltEnv, dir, err)
				return 1
			}
		}
		binDir = dir
		return runScripts(m)
	}
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
	// cordon-weak is a test build that can leave layers out (CORDON_WEAKEN),
	// to show that each escape probe can fail.
	for name, tags := range map[string]string{"cordon": "", "cordon-weak": "cordon_weaken"} {
		if err := testbin.Cordon(filepath.Join(dir, name), "-trimpath", "-ldflags=-s -w", "-tags="+tags); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			return 1
		}
	}
	// mcpfake is an MCP tool server the gateway scripts front.
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "mcpfake"), "./testdata/mcpfake")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building mcpfake:", err)
		return 1
	}
	binDir = dir
	client, err := installMCPClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(filepath.Dir(client))
	mcpClient = client
	return runScripts(m)
}

// runScripts runs the tests, and fails if one of them left /no-home.
func runScripts(m *testing.M) int {
	// Scripts run with HOME=/no-home; one that makes it (as root) makes
	// the scripts of other users after it fail.
	_, err := os.Stat("/no-home")
	hadHome := err == nil
	code := m.Run()
	if _, err := os.Stat("/no-home"); err == nil && !hadHome {
		fmt.Fprintln(os.Stderr, "a script created /no-home (HOME in the scripts): give it a HOME or a state directory of its own")
		os.RemoveAll("/no-home")
		return 1
	}
	return code
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			e.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			e.Setenv("CORDON", filepath.Join(binDir, "cordon"))
			e.Setenv("HOSTNAME_OUTSIDE", hostname())
			// The login name, in which cordon approvals decides.
			if u, err := user.Current(); err == nil {
				e.Setenv("LOGIN", u.Username)
			}
			e.Setenv("BINDIR", binDir)
			e.Setenv("MCPCLIENT", mcpClient)
			// The reference filesystem server, installed with the client.
			e.Setenv("MCPSERVERS", filepath.Dir(mcpClient))
			// How many times mcp_swap_loop races the server (its default
			// when unset).
			e.Setenv("SWAPTRIES", os.Getenv("SWAPTRIES"))
			e.Setenv("WEBAPPROVER", filepath.Join(filepath.Dir(mcpClient), "web.mjs"))
			examples, err := filepath.Abs("../../examples/profiles")
			if err != nil {
				return err
			}
			e.Setenv("EXAMPLES", examples)
			// Each script's audit log, outside its work directory (the
			// default workspace, which the sandbox sees); open to the
			// rootless scripts' user.
			auditDir := e.WorkDir + "-audit"
			if err := os.Mkdir(auditDir, 0o777); err != nil {
				return err
			}
			if err := os.Chmod(auditDir, 0o777); err != nil {
				return err
			}
			e.Setenv("AUDIT", auditDir)
			// cordon's state (what it keeps between runs), outside the work
			// directory too; a script may choose another.
			e.Setenv("CORDON_STATE_DIR", e.WorkDir+"-state")
			e.Setenv("CORDON_AUDIT_LOG", filepath.Join(auditDir, "audit.jsonl"))
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
			case "i386":
				// Whether this host runs i386 system calls (int 0x80) at
				// all: some kernels trap them with SIGSEGV outside any
				// sandbox.
				out, _ := exec.Command(filepath.Join(binDir, "cordon"), "__probe", "--attack", "int80").Output()
				return strings.HasPrefix(string(out), "attack: pid "), nil
			case "hostloopback":
				// Whether the host's name resolves to a loopback address
				// on the host, for transparent-mode tests by name.
				addrs, _ := net.LookupHost(hostname())
				for _, a := range addrs {
					if ip := net.ParseIP(a); ip != nil && ip.IsLoopback() {
						return true, nil
					}
				}
				return false, nil
			case "vsock":
				// Whether the kernel has a vsock transport (virtual machines).
				_, err := os.Stat("/dev/vsock")
				return err == nil, nil
			case "cgroups":
				// Whether cordon may create cgroups here.
				out, _ := exec.Command(filepath.Join(binDir, "cordon"), "doctor", "--json").Output()
				return strings.Contains(string(out), `"delegated": true`), nil
			case "chromium":
				// Whether Debian's Chromium is here, for the approvals page.
				_, err := os.Stat("/usr/bin/chromium")
				return err == nil && mcpClient != "", nil
			case "mcpclient":
				// Whether the MCP TypeScript SDK client could be installed.
				return mcpClient != "", nil
			case "sandbox":
				// Whether this host can run cordon sandboxes at all.
				return exec.Command(filepath.Join(binDir, "cordon"), "doctor").Run() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"owner":        cmdOwner,
			"running":      cmdRunning,
			"outcome":      cmdOutcome,
			"outcomevalid": cmdOutcomeValid,
			"savepid":      cmdSavePid,
			"cgroupgone":   cmdCgroupGone,
			"httpserve":    cmdHTTPServe,
			"cgdelegate":   cmdCgDelegate,
			"cgroupread":   cmdCgroupRead,
			"freeport":     cmdFreePort,
			"waitport":     cmdWaitPort,
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
		found := ""
		pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range pids {
			if b, err := os.ReadFile(p); err == nil && string(b) == want {
				found = filepath.Dir(p)
				break
			}
		}
		if (found != "") != neg {
			return
		}
		if time.Now().After(deadline) {
			if neg {
				ts.Fatalf("%q still running after 10s: %s", strings.Join(args, " "), ancestry(found))
			}
			ts.Fatalf("%q not running after 10s", strings.Join(args, " "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcome FILE PATH REGEXP: the JSON value at PATH in the outcome file
// matches REGEXP. PATH is dotted; in a list, a number picks by index and a
// word by the "name" field ("limits.memory.used").
func cmdOutcome(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: outcome FILE PATH REGEXP")
	}
	var v any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &v))
	for _, key := range strings.Split(args[1], ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[key]
		case []any:
			var found any
			if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(x) {
				v = x[i]
				continue
			}
			for _, item := range x {
				if m, ok := item.(map[string]any); ok && m["name"] == key {
					found = item
				}
			}
			v = found
		default:
			v = nil
		}
	}
	got, _ := json.Marshal(v)
	ok := regexp.MustCompile(args[2]).Match(got)
	if ok == neg {
		ts.Fatalf("outcome %s = %s; want %s%s", args[1], got, map[bool]string{true: "no match for ", false: ""}[neg], args[2])
	}
}

// outcomevalid [-schema NAME] FILE: the file follows docs/NAME.schema.json
// (outcome by default).
func cmdOutcomeValid(ts *testscript.TestScript, neg bool, args []string) {
	name := "outcome"
	if len(args) == 3 && args[0] == "-schema" {
		name, args = args[1], args[2:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: outcomevalid [-schema NAME] FILE")
	}
	schema, err := jsonschema.NewCompiler().Compile("../../docs/" + name + ".schema.json")
	ts.Check(err)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(ts.ReadFile(args[0])))
	ts.Check(err)
	if err := schema.Validate(inst); (err == nil) == neg {
		ts.Fatalf("outcome %s against the schema: %v", args[0], err)
	}
}

// savepid VAR ARG...: VAR is set to the pid of the process whose command line
// is ARG... (the program by its base name), waiting up to ten seconds for it.
func cmdSavePid(ts *testscript.TestScript, neg bool, args []string) {
	want := strings.Join(args[1:], "\x00") + "\x00"
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if prog, rest, ok := strings.Cut(string(b), "\x00"); ok && filepath.Base(prog)+"\x00"+rest == want {
				ts.Setenv(args[0], filepath.Base(filepath.Dir(p)))
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("no process %q", strings.Join(args[1:], " "))
}

// cgdelegate UID: delegates cgroups to UID, as a host administrator (or
// systemd's Delegate=yes) does for a user: a new cgroup below the test's
// own, owned by UID, in each v1 hierarchy cordon uses or, on cgroup v2, in
// the unified one with the memory, pids and cpu controllers enabled for it.
// CGPROCS lists their cgroup.procs, for a shell to move itself into before
// it becomes UID. They are removed when the script ends.
func cmdCgDelegate(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: cgdelegate UID")
	}
	uid, err := strconv.Atoi(args[0])
	ts.Check(err)
	self, err := os.ReadFile("/proc/self/cgroup")
	ts.Check(err)
	own := func(controller string) string {
		for _, line := range strings.Split(string(self), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			if controller == "" && parts[0] == "0" && parts[1] == "" || controller != "" && slices.Contains(strings.Split(parts[1], ","), controller) {
				return parts[2]
			}
		}
		return "/"
	}
	name := fmt.Sprintf("delegated-%d-%d", os.Getpid(), time.Now().UnixNano())
	// delegate makes dir, owned by uid with the files in it that match
	// one of keep (all of them when keep is empty), as systemd hands them
	// over.
	delegate := func(dir string, keep ...string) string {
		if err := os.Mkdir(dir, 0o755); err != nil {
			ts.Fatalf("cgdelegate: %v", err)
		}
		ts.Defer(func() {
			// The shell that moved in has ended; its cgroup empties, but
			// cordon's supervisor leaf (v2) stays below it.
			os.Remove(filepath.Join(dir, "cordon.supervisor"))
			for i := 0; i < 100 && os.Remove(dir) != nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
		})
		ts.Check(os.Chown(dir, uid, uid))
		ents, err := os.ReadDir(dir)
		ts.Check(err)
		for _, e := range ents {
			if len(keep) == 0 || slices.Contains(keep, e.Name()) {
				ts.Check(os.Chown(filepath.Join(dir, e.Name()), uid, uid))
			}
		}
		return filepath.Join(dir, "cgroup.procs")
	}
	var procs []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		parent := filepath.Join("/sys/fs/cgroup", own(""))
		// The controllers must be enabled in the parent first; a parent
		// other than the root that holds processes refuses (EBUSY).
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0o644); err != nil {
			ts.Fatalf("cgdelegate: enabling the controllers in %s: %v", parent, err)
		}
		procs = append(procs, delegate(filepath.Join(parent, name), "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"))
	} else {
		for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
			dir := filepath.Join("/sys/fs/cgroup", c, own(c), name)
			if _, err := os.Stat(filepath.Dir(dir)); err != nil {
				ts.Fatalf("cgdelegate needs cgroup v2 or the v1 %s controller: %v", c, err)
			}
			procs = append(procs, delegate(dir))
		}
	}
	ts.Setenv("CGPROCS", strings.Join(procs, " "))
}

// cgroupgone PID: within ten seconds no cgroup of the cordon process PID is
// left in any hierarchy.
func cmdCgroupGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: cgroupgone PID|@FILE")
	}
	pids := []string{args[0]}
	if file, ok := strings.CutPrefix(args[0], "@"); ok {
		pids = strings.Fields(ts.ReadFile(file))
		if len(pids) == 0 {
			ts.Fatalf("no pids in %s", file)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			for _, pid := range pids {
				if strings.HasPrefix(d.Name(), "cordon-"+pid+"-") {
					left = append(left, p)
					return filepath.SkipDir
				}
			}
			if strings.Count(p, "/") > 7 {
				return filepath.SkipDir
			}
			return nil
		})
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("cgroups left behind: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupread VAR PID FILE...: VAR is set to the content of the first FILE
// that one of the cgroups of the cordon process PID has (cpu.max on v2,
// cpu.cfs_quota_us on v1), waiting up to ten seconds for it to exist and to hold a limit (not the kernel's "no limit", read before cordon writes its own).
func cmdCgroupRead(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 || neg {
		ts.Fatalf("usage: cgroupread VAR PID FILE...")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var found []byte
		filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || found != nil {
				return nil
			}
			if strings.HasPrefix(d.Name(), "cordon-"+args[1]+"-") {
				for _, f := range args[2:] {
					if b, err := os.ReadFile(filepath.Join(p, f)); err == nil {
						found = b
						break
					}
				}
				return filepath.SkipDir
			}
			if strings.Count(p, "/") > 7 {
				return filepath.SkipDir
			}
			return nil
		})
		// cordon makes the cgroup, then writes its limits: a value that
		// is still the kernel's "no limit" may be read in between.
		v := strings.TrimSpace(string(found))
		unset := v == "-1" || strings.HasPrefix(v, "max")
		if found != nil && (!unset || time.Now().After(deadline)) {
			ts.Setenv(args[0], v)
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no cgroup of %s with %s after 10s", args[1], strings.Join(args[2:], " or "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpserve [-tls] VAR: serves HTTP on a loopback port of the host for the
// rest of the script and sets VAR to the port. GET answers "page from the
// host"; any request body is read and counted.
func cmdHTTPServe(ts *testscript.TestScript, neg bool, args []string) {
	useTLS := len(args) == 2 && args[0] == "-tls"
	if useTLS {
		args = args[1:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: httpserve [-tls] VAR")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "page from the host (%d bytes received)\n", n)
	})
	srv := httptest.NewUnstartedServer(h)
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	ts.Defer(srv.Close)
	ts.Setenv(args[0], strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port))
}

// ancestry describes a process and its ancestors, for a failure message.
func ancestry(dir string) string {
	var b strings.Builder
	for i := 0; i < 6 && dir != "/proc/0" && dir != "/proc/1"; i++ {
		cmd, _ := os.ReadFile(dir + "/cmdline")
		st, _ := os.ReadFile(dir + "/stat")
		fmt.Fprintf(&b, "\n%s: %q stat %s", dir, strings.ReplaceAll(string(cmd), "\x00", " "), st)
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) < 2 {
			break
		}
		dir = "/proc/" + f[1]
	}
	return b.String()
}
