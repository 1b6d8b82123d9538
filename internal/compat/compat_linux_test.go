package compat_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/testbin"
)

// nobody is the unprivileged user of the rootless columns when the test
// runs as root.
const nobody = 65534

// trust are the host's settings for which certificates to trust, passed to
// the workloads that reach a registry: a host whose traffic goes through a
// TLS-inspecting proxy names its certificate there, and the sandbox sees
// the same /etc/ssl/certs.
var trust = []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR"}

func TestCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("the compatibility suite runs real toolchains; not with -short")
	}
	r := newRig(t)
	cols := columns(r)
	var rows []row
	for _, w := range workloads {
		rw := row{w: w, res: map[string]result{}}
		t.Run(w.name, func(t *testing.T) {
			if why := r.unfit(w); why != "" {
				for _, c := range cols {
					rw.res[c.name] = result{status: "skip", note: why}
				}
				t.Skip(why)
			}
			for _, c := range cols {
				if c.absent != "" {
					rw.res[c.name] = result{status: "absent", note: c.absent}
					continue
				}
				rw.res[c.name] = r.run(w, c, r.env(w))
			}
			errs, notes := judge(w, cols, rw.res)
			for _, n := range notes {
				t.Log(n)
			}
			for _, e := range errs {
				t.Error(e)
			}
		})
		if len(rw.res) > 0 {
			rows = append(rows, rw)
		}
	}
	rep := report(cols, rows)
	t.Log("\n" + rep)
	if p := os.Getenv("CORDON_COMPAT_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(rep), 0o644); err != nil {
			t.Errorf("writing the report: %v", err)
		}
	}
}

// newRig builds cordon and finds what the columns need; it skips the test
// where no cordon sandbox can be made.
func newRig(t *testing.T) *rig {
	base, err := os.MkdirTemp("", "cordon-compat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// The rootless columns' user reaches the workspaces through it.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &rig{cordon: filepath.Join(bin, "cordon"), base: base, view: profile.Default()}
	if err := testbin.Cordon(r.cordon); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(r.cordon, "doctor").CombinedOutput(); err != nil {
		t.Skipf("this host cannot create cordon sandboxes (cordon doctor: %v)\n%s", err, out)
	}
	r.bwrap, _ = exec.LookPath("bwrap")
	r.setpriv, _ = exec.LookPath("setpriv")
	r.index = serveIndex(t)
	return r
}

// columns are the ways the workloads run: cordon as root, cordon rootless,
// bubblewrap; each absent, saying why, where this host or user cannot.
func columns(r *rig) []column {
	root := os.Geteuid() == 0
	other := -1
	if root {
		other = nobody
	}
	cols := []column{
		{name: "cordon (root)", user: -1},
		{name: "cordon (rootless)", user: other, flags: []string{"--allow-degraded=cgroup"}},
		{name: "bubblewrap", user: other, bwrap: true},
	}
	for i := range cols {
		c := &cols[i]
		switch {
		case c.name == "cordon (root)" && !root:
			c.absent = "needs root"
		case c.user >= 0 && r.setpriv == "":
			c.absent = "needs setpriv to run as another user"
		case c.bwrap && r.bwrap == "":
			c.absent = "bubblewrap is not installed"
		}
	}
	return cols
}

var (
	reachMu sync.Mutex
	reached = map[string]error{}
)

// unfit says why workload w cannot run on this host, "" when it can: a
// command it needs is missing, or the registry it reaches cannot be reached
// from the host itself (checked once, within 15 seconds).
func (r *rig) unfit(w workload) string {
	for _, c := range w.needs {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Sprintf("needs %s, which this host does not have", c)
		}
	}
	if w.reach == "" {
		return ""
	}
	reachMu.Lock()
	defer reachMu.Unlock()
	err, ok := reached[w.reach]
	if !ok {
		client := &http.Client{Timeout: 15 * time.Second}
		var resp *http.Response
		if resp, err = client.Get(w.reach); err == nil {
			resp.Body.Close()
		}
		reached[w.reach] = err
	}
	if err != nil {
		return fmt.Sprintf("the host cannot reach %s (%v): skipped, not failed", w.reach, err)
	}
	return ""
}

// env is what the workload is given inside, the same in every column.
func (r *rig) env(w workload) []string {
	var env []string
	for _, a := range w.allow {
		if a == "INDEX" {
			env = append(env, "INDEX_URL=http://"+r.index+"/simple/")
		}
	}
	if w.reach != "" {
		for _, k := range trust {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	return env
}
