package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// heldFixture is a server whose sessions are held for a person from their
// third step on, with a sandbox of agent a that took two steps.
func heldFixture(t *testing.T, limits string) (*fixture, api.Sandbox) {
	t.Helper()
	return heldFixtureWith(t, limits, nil)
}

// heldFixtureWith is heldFixture whose fake sandboxes answer with result.
func heldFixtureWith(t *testing.T, limits string, result func([]string) outcome.Outcome) (*fixture, api.Sandbox) {
	t.Helper()
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\n"+limits+"trajectory:\n  rules:\n    - name: many\n      when: 'session.steps >= 2'\n      action: approve\n"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, 0, p, result, nil, func(o *Options) { o.Approvals = store })
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"one", "two"} {
		if _, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{arg}}); err != nil {
			t.Fatal(err)
		}
	}
	return f, sb
}

// approveOnly approves the one pending request and returns what it
// showed.
func (f *fixture) approveOnly(t *testing.T) map[string]any {
	t.Helper()
	ctx := context.Background()
	admin := f.client("ops")
	pending, err := admin.Approvals(ctx, false)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	var shown map[string]any
	if err := json.Unmarshal(pending[0].Args, &shown); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Decide(ctx, pending[0].ID, true, api.Decision{Reason: "fine"}); err != nil {
		t.Fatal(err)
	}
	return shown
}

func (f *fixture) inputs(id string) []string {
	f.mu.Lock()
	b := f.boxes[id]
	f.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string{}, b.inputs...)
}

// An approved command runs only as it was approved: its argv, its
// environment's names and values, its directory and its stdin, which the
// approver is shown by size, SHA-256 and an escaped beginning.
func TestHeldCommandRunsOnlyAsApproved(t *testing.T) {
	f, sb := heldFixture(t, "")
	ctx := context.Background()
	a := f.client("alice-a")
	approved := api.ExecRequest{Args: []string{"sh"}, Env: map[string]string{"MODE": "safe"}, Dir: "/workspace", Stdin: []byte("echo benign\x1b[2J\u202e")}
	if _, err := a.Run(ctx, sb.ID, approved); !client.IsStatus(err, 423) {
		t.Fatalf("the held command: %v", err)
	}
	shown := f.approveOnly(t)
	stdin, _ := shown["stdin"].(map[string]any)
	sum := sha256.Sum256(approved.Stdin)
	if stdin["bytes"] != float64(len(approved.Stdin)) || stdin["sha256"] != hex.EncodeToString(sum[:]) ||
		stdin["preview"] != `echo benign\x1b[2J\u202e` || shown["dir"] != "/workspace" || shown["env"].(map[string]any)["MODE"] != "safe" {
		t.Fatalf("the approver was shown %v", shown)
	}
	for name, other := range map[string]api.ExecRequest{
		"other stdin":         {Args: approved.Args, Env: approved.Env, Dir: approved.Dir, Stdin: []byte("echo NOT-WHAT-WAS-APPROVED; rm -f w1.txt")},
		"no stdin":            {Args: approved.Args, Env: approved.Env, Dir: approved.Dir},
		"another env value":   {Args: approved.Args, Env: map[string]string{"MODE": "unsafe"}, Dir: approved.Dir, Stdin: approved.Stdin},
		"another env name":    {Args: approved.Args, Env: map[string]string{"MODE": "safe", "LD_PRELOAD": "/x.so"}, Dir: approved.Dir, Stdin: approved.Stdin},
		"another directory":   {Args: approved.Args, Env: approved.Env, Dir: "/", Stdin: approved.Stdin},
		"another argv":        {Args: []string{"sh", "-x"}, Env: approved.Env, Dir: approved.Dir, Stdin: approved.Stdin},
		"stdin one byte more": {Args: approved.Args, Env: approved.Env, Dir: approved.Dir, Stdin: append([]byte(string(approved.Stdin)), ' ')},
	} {
		if _, err := a.Run(ctx, sb.ID, other); !client.IsStatus(err, 423) {
			t.Errorf("%s, under the approval of another command: %v", name, err)
		}
	}
	if in := f.inputs(sb.ID); len(in) != 0 {
		t.Fatalf("commands that were not approved ran with stdin %q", in)
	}
	res, err := a.Run(ctx, sb.ID, approved)
	if err != nil || !strings.Contains(string(res.Stdout), "ran sh") {
		t.Fatalf("the approved command: %v", err)
	}
	if in := f.inputs(sb.ID); len(in) != 1 || in[0] != string(approved.Stdin) {
		t.Fatalf("the approved command ran with stdin %q", in)
	}
}

// An approved upload writes only the content that was approved, which the
// approver is shown by size, SHA-256 and an escaped beginning.
func TestHeldUploadWritesOnlyWhatWasApproved(t *testing.T) {
	f, sb := heldFixture(t, "")
	ctx := context.Background()
	a := f.client("alice-a")
	good := strings.Repeat("benign\n", 100)
	if err := a.Upload(ctx, sb.ID, "/workspace/w1.txt", strings.NewReader(good), 0o600); !client.IsStatus(err, 423) {
		t.Fatalf("the held upload: %v", err)
	}
	shown := f.approveOnly(t)
	c, _ := shown["content"].(map[string]any)
	sum := sha256.Sum256([]byte(good))
	if shown["path"] != "/workspace/w1.txt" || shown["mode"] != "600" || c["bytes"] != float64(len(good)) || c["sha256"] != hex.EncodeToString(sum[:]) ||
		c["preview"] != strings.Repeat(`benign\n`, 36)+"beni..." {
		t.Fatalf("the approver was shown %v", shown)
	}
	for name, body := range map[string]string{"other content": "rm -rf /\n", "one byte more": good + "x", "nothing": ""} {
		if err := a.Upload(ctx, sb.ID, "/workspace/w1.txt", strings.NewReader(body), 0o600); !client.IsStatus(err, 423) {
			t.Errorf("%s, under the approval of another upload: %v", name, err)
		}
	}
	if err := a.Upload(ctx, sb.ID, "/workspace/w1.txt", strings.NewReader(good), 0o644); !client.IsStatus(err, 423) {
		t.Errorf("another mode, under the approval of another upload: %v", err)
	}
	if in := f.inputs(sb.ID); len(in) != 0 {
		t.Fatalf("uploads that were not approved were written: %q", in)
	}
	if err := a.Upload(ctx, sb.ID, "/workspace/w1.txt", strings.NewReader(good), 0o600); err != nil {
		t.Fatalf("the approved upload: %v", err)
	}
	if in := f.inputs(sb.ID); len(in) != 1 || in[0] != good {
		t.Fatalf("the approved upload wrote %q", in)
	}
}

// An upload over the sandbox's file size limit is refused with 413,
// whether it says its length or not, and nothing is written.
func TestUploadOverFileSize(t *testing.T) {
	p, err := profile.Parse("t.yaml", []byte("version: 1\nagent: a\nresources:\n  file_size: 1KiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 0, p, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Upload(ctx, sb.ID, "/workspace/ok", strings.NewReader(strings.Repeat("x", 1024)), 0); err != nil {
		t.Fatalf("an upload of the limit: %v", err)
	}
	big := strings.Repeat("x", 1025)
	if err := a.Upload(ctx, sb.ID, "/workspace/big", strings.NewReader(big), 0); !client.IsStatus(err, 413) {
		t.Errorf("an upload over the limit: %v", err)
	}
	// Without a length (chunked), it is found out while spooling.
	if err := a.Upload(ctx, sb.ID, "/workspace/big", io.MultiReader(strings.NewReader(big)), 0); !client.IsStatus(err, 413) {
		t.Errorf("a chunked upload over the limit: %v", err)
	}
	if in := f.inputs(sb.ID); len(in) != 1 {
		t.Fatalf("%d uploads written, want 1", len(in))
	}
}

// The spool is cordon's own directory (0700) under the state directory,
// emptied at start, and holds no file by name while an upload waits.
func TestSpool(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "spool"), 0o755); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(state, "spool", "upload-1")
	if err := os.WriteFile(left, []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := &Server{}
	if err := srv.makeSpool(filepath.Join(state, "spool")); err != nil {
		t.Fatal(err)
	}
	sp := openUploads(srv.spoolDir)
	if st, err := os.Stat(sp.dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the spool: %v %v", st.Mode(), err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("a file an earlier server left: %v", err)
	}
	body, err := sp.take(strings.NewReader("hello"), 5)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if names, _ := os.ReadDir(sp.dir); len(names) != 0 {
		t.Fatalf("the spool shows %v", names)
	}
	if st, _ := body.f.Stat(); st.Mode().Perm() != 0o600 {
		t.Fatalf("a spooled body is %v", st.Mode())
	}
	got, _ := io.ReadAll(body.reader())
	if string(got) != "hello" || body.SHA256 != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("spooled %q, %s", got, body.SHA256)
	}
	if _, err := sp.take(strings.NewReader("hello!"), 5); err != errTooLarge {
		t.Fatalf("over the limit: %v", err)
	}
	// A symbolic link where the spool should be is refused.
	other := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(other, "spool")); err != nil {
		t.Fatal(err)
	}
	if err := (&Server{}).makeSpool(filepath.Join(other, "spool")); err == nil {
		t.Fatal("a spool that is a symbolic link was taken")
	}
}
