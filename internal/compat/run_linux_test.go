package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// runTimeout bounds one run of one workload, so that a hang fails the run
// instead of the whole test binary. It is no assertion on speed.
const runTimeout = 5 * time.Minute

// rig is what the suite runs with on this host.
type rig struct {
	cordon  string // the cordon binary built for the run
	bwrap   string // "" when bubblewrap is absent
	setpriv string
	base    string // the directory of every run's workspace, home and outcome
	view    *profile.Profile
	index   string // the package index's host:port

	warmOnce sync.Once
	warm     string // the warmed Go build cache, "" until made
	warmErr  error
}

// run runs workload w in column c.
func (r *rig) run(w workload, c column, env []string) result {
	p, err := r.prepare(w, c, env)
	if err != nil {
		return result{status: "fail", note: err.Error()}
	}
	argv, err := r.command(w, c, p)
	if err != nil {
		return result{status: "fail", note: "setting up: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := r.asUserContext(ctx, c, argv)
	cmd.Dir, cmd.Env = p.ws, p.hostEnv
	if w.tty {
		cmd.Stdin = strings.NewReader(w.input)
	}
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	b, err := cmd.CombinedOutput()
	res := result{wall: time.Since(start), status: "pass"}
	switch {
	case ctx.Err() != nil:
		res.status, res.note, res.output = "fail", fmt.Sprintf("still running after %v, stopped", runTimeout), tail(b)
	case err != nil:
		res.status, res.note, res.output = "fail", err.Error(), tail(b)
		if k, ok := known[w.name]; ok && !c.bwrap && bytes.Contains(b, []byte(k.shows)) {
			res.status, res.note = "known", k.cause
		}
	case !c.bwrap:
		if why := checkOutcome(p.outcome, w, r.index); why != "" {
			res.status, res.note, res.output = "fail", why, tail(b)
		}
	}
	return res
}

// prepared is one run's directories and environment, made ready.
type prepared struct {
	dir, ws, outcome string
	env              []string // the workload's, inside
	hostEnv          []string // cordon's or bubblewrap's
}

// prepare makes the run's workspace (the script, a Go build cache where
// the workload has one, what the host-side setup makes), home and outcome
// directories, owned by the column's user.
func (r *rig) prepare(w workload, c column, env []string) (prepared, error) {
	dir := filepath.Join(r.base, w.name+"-"+c.name)
	ws, home, out := filepath.Join(dir, "ws"), filepath.Join(dir, "home"), filepath.Join(dir, "out")
	p := prepared{dir: dir, ws: ws, outcome: filepath.Join(out, "outcome.json"), env: env,
		hostEnv: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm", "HOME=" + home,
			"CORDON_AUDIT_LOG=" + filepath.Join(out, "audit.jsonl")}}
	for _, d := range []string{dir, ws, home, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return p, fmt.Errorf("setting up: %w", err)
		}
	}
	body, setup, err := script(w)
	if err != nil {
		return p, fmt.Errorf("reading the workload: %w", err)
	}
	if err := os.WriteFile(filepath.Join(ws, "workload.sh"), body, 0o644); err != nil {
		return p, fmt.Errorf("setting up: %w", err)
	}
	if w.gocache {
		cache, err := r.goCache()
		if err != nil {
			return p, err
		}
		dst := filepath.Join(ws, ".gocache")
		if b, err := exec.Command("cp", "-a", cache, dst).CombinedOutput(); err != nil {
			return p, fmt.Errorf("copying the Go build cache: %v: %s", err, b)
		}
		p.env = append(slices.Clip(p.env), "GOCACHE="+dst)
	}
	if r.asOther(c) {
		for _, d := range []string{ws, home, out} {
			if err := chownAll(d, c.user); err != nil {
				return p, fmt.Errorf("setting up: %w", err)
			}
		}
	}
	if len(setup) > 0 {
		cmd := r.asUser(c, []string{"sh", "-c", string(setup)})
		cmd.Dir = ws
		cmd.Env = slices.Concat(p.hostEnv, []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=owner", "GIT_AUTHOR_EMAIL=owner@example.invalid",
			"GIT_COMMITTER_NAME=owner", "GIT_COMMITTER_EMAIL=owner@example.invalid"})
		if b, err := cmd.CombinedOutput(); err != nil {
			return p, fmt.Errorf("the host-side setup: %v\n%s", err, tail(b))
		}
	}
	return p, nil
}

// command is the run's command line: cordon's or bubblewrap's, on a
// terminal for a workload that needs one.
func (r *rig) command(w workload, c column, p prepared) ([]string, error) {
	inner := slices.Concat([]string{"env"}, p.env, []string{"bash", "workload.sh"})
	var argv []string
	if c.bwrap {
		b, err := r.bwrapArgs(w, p.ws, p.dir, p.hostEnv)
		if err != nil {
			return nil, err
		}
		argv = b
		if w.tty {
			// cordon makes a terminal of its own inside the sandbox
			// when it runs on one; bubblewrap has no such mode, and
			// script(1) inside it makes the terminal there.
			return append(argv, "script", "-qec", shellJoin(inner), "/dev/null"), nil
		}
		return append(argv, inner...), nil
	}
	argv = []string{r.cordon, "run", "--outcome", p.outcome}
	for _, a := range w.allow {
		argv = append(argv, "--allow", strings.ReplaceAll(a, "INDEX", r.index))
	}
	argv = slices.Concat(argv, c.flags, []string{"--"}, inner)
	if w.tty {
		argv = []string{"script", "-qec", shellJoin(argv), "/dev/null"}
	}
	return argv, nil
}

// goCache builds testdata/gowarm once, on the host, into a build cache of
// the suite's own, and returns the cache. The cache stays in the user's
// cache directory for later runs (Go's caches are safe to share and trim
// themselves), so that only the first run on a machine compiles the
// standard library.
func (r *rig) goCache() (string, error) {
	r.warmOnce.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = r.base
		}
		cache := filepath.Join(dir, "cordon-compat", "go-build")
		if err := os.MkdirAll(cache, 0o755); err != nil {
			r.warmErr = fmt.Errorf("the Go build cache for the workloads: %w", err)
			return
		}
		src, err := filepath.Abs(filepath.Join("testdata", "gowarm"))
		if err != nil {
			r.warmErr = err
			return
		}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.base, "GOCACHE=" + cache, "GOFLAGS=-buildvcs=false",
			"GOPROXY=off", "GOTOOLCHAIN=local", "GOPATH=" + filepath.Join(r.base, "gopath")}
		for _, args := range [][]string{{"vet", "."}, {"test", "-count=1", "."}, {"build", "-o", os.DevNull, "."}} {
			cmd := exec.Command("go", args...)
			cmd.Dir, cmd.Env = src, env
			if b, err := cmd.CombinedOutput(); err != nil {
				r.warmErr = fmt.Errorf("warming the Go build cache (go %s): %v: %s", strings.Join(args, " "), err, b)
				return
			}
		}
		r.warm = cache
	})
	return r.warm, r.warmErr
}

// checkOutcome reads cordon's outcome of a run that passed: its status must
// be ok, and, for a workload that reaches the network, every allowed
// destination must show an allowed connection.
func checkOutcome(path string, w workload, index string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "cordon's outcome: " + err.Error()
	}
	var o struct {
		Status string `json:"status"`
		Egress []struct {
			Host     string `json:"host"`
			Port     int    `json:"port"`
			Decision string `json:"decision"`
		} `json:"egress"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return "cordon's outcome: " + err.Error()
	}
	if o.Status != "ok" {
		return fmt.Sprintf("cordon's outcome says %q", o.Status)
	}
	if !w.egress {
		return ""
	}
	for _, a := range w.allow {
		dest := strings.ReplaceAll(a, "INDEX", index)
		found := false
		for _, e := range o.Egress {
			if e.Decision == "allow" && e.Host+":"+strconv.Itoa(e.Port) == dest {
				found = true
			}
		}
		if !found {
			return fmt.Sprintf("cordon's outcome shows no allowed connection to %s: the workload did not go through the allowlist", dest)
		}
	}
	return ""
}

// asOther: the column runs as another user than the test's.
func (r *rig) asOther(c column) bool { return c.user >= 0 && os.Geteuid() == 0 }

func (r *rig) asUser(c column, argv []string) *exec.Cmd {
	return r.asUserContext(context.Background(), c, argv)
}

// asUserContext runs argv as the column's user.
func (r *rig) asUserContext(ctx context.Context, c column, argv []string) *exec.Cmd {
	if r.asOther(c) {
		u := strconv.Itoa(c.user)
		argv = append([]string{r.setpriv, "--reuid=" + u, "--regid=" + u, "--clear-groups"}, argv...)
	}
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// bwrapArgs gives bubblewrap the view of cordon's default profile: its
// system paths read-only (symbolic links as links), /proc, a minimal /dev,
// tmpfs /tmp, /dev/shm and home, the account files cordon writes, the
// workspace read-write, the profile's environment and user, new namespaces
// of every kind but the network for a workload that reaches it (bubblewrap
// has no egress proxy: it shares the host's network instead).
// etc receives the account files; hostEnv is the environment cordon would
// be given, from which the profile passes variables.
func (r *rig) bwrapArgs(w workload, ws, etc string, hostEnv []string) ([]string, error) {
	p := r.view
	args := []string{r.bwrap, "--die-with-parent", "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		"--uid", strconv.Itoa(p.User.UID), "--gid", strconv.Itoa(p.User.GID), "--hostname", p.Hostname}
	if len(w.allow) == 0 {
		args = append(args, "--unshare-net")
	}
	// No terminal of the host's that the command could push input into
	// (TIOCSTI).
	args = append(args, "--new-session")
	for _, m := range p.Mounts {
		fi, err := os.Lstat(m.Path)
		if err != nil {
			continue // optional, and absent here
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(m.Path); err == nil {
				args = append(args, "--symlink", target, m.Dest())
			}
			continue
		}
		args = append(args, "--ro-bind", m.Path, m.Dest())
	}
	home := p.User.Home()
	args = append(args, "--proc", "/proc", "--dev", "/dev",
		"--perms", "1777", "--tmpfs", "/dev/shm", "--perms", "1777", "--tmpfs", "/tmp", "--perms", "0700", "--tmpfs", home)
	for name, body := range map[string]string{
		"passwd": fmt.Sprintf("%s:x:%d:%d:%s:%s:/bin/sh\n", p.User.Name, p.User.UID, p.User.GID, p.User.Name, home),
		"group":  fmt.Sprintf("%s:x:%d:\n", p.User.Name, p.User.GID),
		"hosts":  "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + p.Hostname + "\n",
	} {
		f := filepath.Join(etc, name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--ro-bind", f, "/etc/"+name)
	}
	args = append(args, "--bind", ws, ws, "--chdir", ws, "--clearenv")
	lookup := func(k string) (string, bool) {
		for _, kv := range hostEnv {
			if name, v, _ := strings.Cut(kv, "="); name == k {
				return v, true
			}
		}
		return "", false
	}
	for _, kv := range p.Environ(lookup) {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	return append(args, "--"), nil
}

// chownAll gives a tree to uid (and the same gid).
func chownAll(dir string, uid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// tail is the end of a run's output, for a failure message.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

// shellJoin quotes argv for sh -c (script(1) takes a command line).
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
