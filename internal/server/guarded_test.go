package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// execIn runs a command in sandbox id as agent a and returns its outcome.
func (rf *reviewFixture) execIn(t *testing.T, id string) outcome.Outcome {
	t.Helper()
	o, err := rf.client("alice-a").Exec(context.Background(), id, api.ExecRequest{Args: []string{"true"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A guarded sandbox's command lands what it wrote at once, but for what
// the host's tools would obey, which waits as the sandbox's change set;
// both the landing and what landed are in the audit log.
func TestGuardedLandsAfterEachCommand(t *testing.T) {
	rf := newLayerFixture(t, 0, "guarded", "")
	id := rf.create(t)
	upper := rf.upper(id)
	writeFile(t, filepath.Join(upper, "notes", "a.txt"), "a\n", 0o644)
	writeFile(t, filepath.Join(upper, ".hg", "hgrc"), "[hooks]\npre-status = touch /tmp/pwned\n", 0o644)
	o := rf.execIn(t, id)
	if o.Changes == nil || o.Changes.Landed != 2 || o.Changes.Entries != 2 || o.Changes.Digest == "" {
		t.Fatalf("the command's outcome says of its changes: %+v; want notes and notes/a.txt landed, .hg and .hg/hgrc waiting", o.Changes)
	}
	if readFile(t, filepath.Join(rf.ws, "notes", "a.txt")) != "a\n" {
		t.Fatal("notes/a.txt did not land")
	}
	if _, err := os.Lstat(filepath.Join(rf.ws, ".hg")); !os.IsNotExist(err) {
		t.Fatalf(".hg landed without approval (%v)", err)
	}
	got := rf.changesOf(t, "ops", id)
	if len(got.NeedsApproval) != 2 || got.Set.Digest != o.Changes.Digest {
		t.Fatalf("the held changes: %+v (digest %s, the outcome's %s)", got.NeedsApproval, got.Set.Digest, o.Changes.Digest)
	}
	rf.srv.opts.Audit.Flush()
	log := readFile(t, rf.log)
	for _, want := range []string{`"type":"changes_land"`, `"type":"changes_landed"`, `"by":"guarded"`, `"notes/a.txt"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
	// The next command writes nothing new: nothing more lands, the held
	// set is the same.
	o = rf.execIn(t, id)
	if o.Changes == nil || o.Changes.Landed != 0 || o.Changes.Digest != got.Set.Digest {
		t.Fatalf("a command that wrote nothing: %+v", o.Changes)
	}
	// An approver applies the held set.
	if status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest}); status != 200 {
		t.Fatalf("apply: %d %s", status, body)
	}
	if readFile(t, filepath.Join(rf.ws, ".hg", "hgrc")) == "" {
		t.Fatal(".hg/hgrc did not land once applied")
	}
}

// A path that landed and that the sandbox changes again lands again: the
// change cordon made on the host is no conflict. One the host changed
// since is, and waits.
func TestGuardedLandedAgainIsNoConflict(t *testing.T) {
	rf := newLayerFixture(t, 0, "guarded", "")
	id := rf.create(t)
	upper := rf.upper(id)
	f := filepath.Join(upper, "f.txt")
	for _, v := range []string{"1\n", "2\n", "3\n"} {
		writeFile(t, f, v, 0o644)
		o := rf.execIn(t, id)
		if o.Changes == nil || o.Changes.Landed != 1 || o.Changes.Conflicts != 0 || o.Changes.Entries != 0 {
			t.Fatalf("after writing %q: %+v", v, o.Changes)
		}
		if got := readFile(t, filepath.Join(rf.ws, "f.txt")); got != v {
			t.Fatalf("the host has %q, want %q", got, v)
		}
	}
	writeFile(t, filepath.Join(rf.ws, "f.txt"), "the host's\n", 0o644)
	writeFile(t, f, "4\n", 0o644)
	o := rf.execIn(t, id)
	if o.Changes == nil || o.Changes.Landed != 0 || o.Changes.Entries != 1 {
		t.Fatalf("after the host changed f.txt: %+v, want it waiting", o.Changes)
	}
	if got := readFile(t, filepath.Join(rf.ws, "f.txt")); got != "the host's\n" {
		t.Fatalf("the host's change was overwritten: %q", got)
	}
	got := rf.changesOf(t, "ops", id)
	if len(got.Set.Changes) != 1 || !got.Set.Changes[0].Has(changes.FlagConflict) {
		t.Fatalf("the waiting change: %+v", got.Set.Changes)
	}
}

// Nothing lands while a process of the sandbox runs: the command's
// outcome says why, and what it wrote lands once nothing runs.
func TestGuardedWaitsWhileBusy(t *testing.T) {
	rf := newLayerFixture(t, 0, "guarded", "")
	id := rf.create(t)
	b := rf.boxes[id]
	b.fakeBox.mu.Lock()
	b.busy = true
	b.fakeBox.mu.Unlock()
	writeFile(t, filepath.Join(rf.upper(id), "late.txt"), "late\n", 0o644)
	o := rf.execIn(t, id)
	if o.Changes == nil || o.Changes.Pending == "" || o.Changes.Landed != 0 {
		t.Fatalf("a command whose sandbox is busy: %+v", o.Changes)
	}
	if _, err := os.Lstat(filepath.Join(rf.ws, "late.txt")); !os.IsNotExist(err) {
		t.Fatalf("late.txt landed while the sandbox was busy (%v)", err)
	}
	b.fakeBox.mu.Lock()
	b.busy = false
	b.fakeBox.mu.Unlock()
	waitFor(t, "late.txt to land", func() bool {
		_, err := os.Lstat(filepath.Join(rf.ws, "late.txt"))
		return err == nil
	})
}

// What the last command left, and what was written after it, lands when
// the sandbox ends; what is held is kept as its change set.
func TestGuardedLandsAtTheEnd(t *testing.T) {
	rf := newLayerFixture(t, 0, "guarded", "")
	id := rf.create(t)
	upper := rf.upper(id)
	writeFile(t, filepath.Join(upper, "end.txt"), "end\n", 0o644)
	writeFile(t, filepath.Join(upper, ".yarnrc.yml"), "yarnPath: ./.y.cjs\n", 0o644)
	if _, err := rf.client("alice-a").Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(rf.ws, "end.txt")) != "end\n" {
		t.Fatal("end.txt did not land at the end")
	}
	set, err := changes.Load(filepath.Join(rf.state, "changes"), id)
	if err != nil || len(set.Changes) != 1 || set.Changes[0].Path != ".yarnrc.yml" {
		t.Fatalf("the set kept at the end: %+v (%v)", set, err)
	}
	if _, err := os.Lstat(filepath.Join(rf.ws, ".yarnrc.yml")); !os.IsNotExist(err) {
		t.Fatal(".yarnrc.yml landed without approval")
	}
}

// A server without a state directory has nowhere to keep what waits: it
// refuses a guarded sandbox instead of running one whose writes are lost.
func TestGuardedNeedsStateDir(t *testing.T) {
	rf := newLayerFixture(t, 0, "guarded", "")
	rf.srv.opts.StateDir = ""
	if _, err := rf.client("alice-a").Create(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("a guarded sandbox on a server without a state directory: %v", err)
	}
}
