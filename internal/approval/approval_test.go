package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

const text = `version: 1
agent: reviewer
mounts:
  - path: /usr
network:
  allow:
    - dest: pypi.org:443
resources:
  memory: 1GiB
governance:
  owner: team
  scope: reviews code
  require_approval: true
`

func write(t *testing.T, dir, body string) (string, *profile.Profile) {
	t.Helper()
	path := filepath.Join(dir, "reviewer.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := profile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, p
}

// state gives the test a state directory of its own for trusted records.
func state(t *testing.T) {
	t.Helper()
	dir, saved := t.TempDir(), StateDir
	StateDir = func() string { return dir }
	t.Cleanup(func() { StateDir = saved })
}

func TestApproveThenChange(t *testing.T) {
	state(t)
	dir := t.TempDir()
	path, p := write(t, dir, text)
	if _, err := Gate(path, p); err == nil || !strings.Contains(err.Error(), "requires approval and has none") {
		t.Fatalf("unapproved: %v", err)
	}
	rec, r, err := Write(path, p, "alice", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if rec != filepath.Join(dir, "reviewer.approval.yaml") || r.ProfileSHA256 != p.Hash() {
		t.Fatalf("record %s %+v", rec, r)
	}
	if w, err := Gate(path, p); err != nil || len(w) != 0 {
		t.Fatalf("approved: %v %v", w, err)
	}
	// Recording the approval in the profile itself changes nothing.
	_, p2 := write(t, dir, text+"  approved_by: alice\n  approved_on: 2026-12-01\n")
	if w, err := Gate(path, p2); err != nil || len(w) != 0 {
		t.Fatalf("approval statement: %v %v", w, err)
	}
	// A new destination is an expansion: refused, and named.
	_, grown := write(t, dir, strings.Replace(text, "    - dest: pypi.org:443\n", "    - dest: pypi.org:443\n    - dest: paste.example:443\n", 1))
	_, err = Gate(path, grown)
	if err == nil || !strings.Contains(err.Error(), "+ network.allow: paste.example:443 is allowed") || !strings.Contains(err.Error(), "alice approved it on 2026-12-01") {
		t.Fatalf("expansion: %v", err)
	}
	// A lower limit is a reduction: allowed, with a warning.
	_, shrunk := write(t, dir, strings.Replace(text, "memory: 1GiB", "memory: 512MiB", 1))
	w, err := Gate(path, shrunk)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "memory limit is 512MiB (was 1GiB)") {
		t.Fatalf("reduction: %v %v", w, err)
	}
	// Approval is sticky: dropping require_approval is judged against the
	// approved profile, alone or with an expansion.
	_, free := write(t, dir, strings.Replace(text, "  require_approval: true\n", "", 1))
	if _, err := Gate(path, free); err == nil || !strings.Contains(err.Error(), "governance.require_approval") {
		t.Fatalf("dropping require_approval: %v", err)
	}
	_, sneaky := write(t, dir, strings.Replace(strings.Replace(text, "  require_approval: true\n", "", 1), "    - dest: pypi.org:443\n", "    - dest: pypi.org:443\n    - dest: paste.example:443\n", 1))
	if _, err := Gate(path, sneaky); err == nil || !strings.Contains(err.Error(), "paste.example:443") {
		t.Fatalf("dropping require_approval with an expansion: %v", err)
	}
	// With no record and no require_approval, nothing is asked.
	os.Remove(PathFor(path))
	trusted, _ := trustedPath(path)
	os.Remove(trusted)
	if w, err := Gate(path, free); err != nil || w != nil {
		t.Fatalf("not required: %v %v", w, err)
	}
}

func TestBadRecord(t *testing.T) {
	state(t)
	dir := t.TempDir()
	path, p := write(t, dir, text)
	trusted, _ := trustedPath(path)
	os.MkdirAll(filepath.Dir(trusted), 0o700)
	os.WriteFile(trusted, []byte("agent: x\n"), 0o600)
	if _, err := Gate(path, p); err == nil || !strings.Contains(err.Error(), "not an approval record") {
		t.Fatalf("got %v", err)
	}
}

// Whatever can rewrite a profile can rewrite the record beside it: only the
// record cordon's state keeps vouches. A grown profile with a record copied
// from another approval, or a record written by hand, does not pass.
func TestRecordBesideVouchesForNothing(t *testing.T) {
	state(t)
	dir := t.TempDir()
	path, p := write(t, dir, text)
	if _, _, err := Write(path, p, "alice", time.Now()); err != nil {
		t.Fatal(err)
	}
	// Another profile, grown, approved elsewhere: its record is moved
	// beside the first, and the first is rewritten to match.
	other := t.TempDir()
	grown := strings.Replace(text, "pypi.org:443", "paste.example.com:443", 1)
	opath, op := write(t, other, grown)
	if _, _, err := Write(opath, op, "mallory", time.Now()); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(PathFor(opath))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(PathFor(path), rec, 0o644); err != nil {
		t.Fatal(err)
	}
	path, p = write(t, dir, grown)
	_, err = Gate(path, p)
	if err == nil || !strings.Contains(err.Error(), "grew since alice approved it") {
		t.Fatalf("a forged copy beside the profile let a grown profile pass: %v", err)
	}
	// Never approved on this host: a record beside it does not help.
	fresh := t.TempDir()
	fpath, fp := write(t, fresh, text)
	if err := os.WriteFile(PathFor(fpath), rec, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Gate(fpath, fp); err == nil || !strings.Contains(err.Error(), "requires approval and has none") {
		t.Fatalf("a record this host did not write was trusted: %v", err)
	}
	// Dropping require_approval does not shed the approval this host keeps.
	_, loose := write(t, dir, strings.Replace(grown, "  require_approval: true\n", "", 1))
	if _, err := Gate(path, loose); err == nil || !strings.Contains(err.Error(), "grew since") {
		t.Fatalf("dropping require_approval with an expansion passed: %v", err)
	}
}
