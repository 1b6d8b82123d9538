package server

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// heldRecording is heldFixture whose fake sandbox records the argv of every
// command (the file operations' `cordon __file OP PATH` included).
func heldRecording(t *testing.T) (*fixture, api.Sandbox, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var ran []string
	f, sb := heldFixtureWith(t, "", func(args []string) outcome.Outcome {
		mu.Lock()
		ran = append(ran, strings.Join(args, " "))
		mu.Unlock()
		code := 0
		return outcome.Outcome{Status: outcome.OK, CommandExitCode: &code}
	})
	return f, sb, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string{}, ran...) }
}

// An approval covers one operation on names, not another on the same
// path: a mkdir's (sent with recursive=1, which mkdir takes no notice of)
// is no recursive remove's, and a stat's is no download's.
func TestAttack_HeldMkdirApprovalRunsRemove(t *testing.T) {
	f, sb, ran := heldRecording(t)
	base := "/v1/sandboxes/" + sb.ID + "/files"
	status, body := f.call(t, "alice-a", "POST", base+"/mkdir?path=/workspace/src&recursive=1", nil)
	if status != http.StatusLocked {
		t.Fatalf("the held mkdir: %d %s", status, body)
	}
	if shown := f.approveOnly(t); shown["operation"] != "file_mkdir" || shown["recursive"] != nil {
		t.Errorf("the approver was shown %v", shown)
	}
	if status, body = f.call(t, "alice-a", "DELETE", base+"?path=/workspace/src&recursive=1", nil); status != http.StatusLocked {
		t.Errorf("a remove under the mkdir's approval: %d %s", status, body)
	}
	for _, r := range ran() {
		if strings.Contains(r, "__file remove /workspace/src recursive") {
			t.Errorf("a recursive remove ran under the approval of a mkdir")
		}
	}
}

func TestAttack_HeldStatApprovalRunsDownload(t *testing.T) {
	f, sb, ran := heldRecording(t)
	base := "/v1/sandboxes/" + sb.ID + "/files"
	status, body := f.call(t, "alice-a", "GET", base+"/stat?path=/workspace/.env", nil)
	if status != http.StatusLocked {
		t.Fatalf("the held stat: %d %s", status, body)
	}
	if shown := f.approveOnly(t); shown["operation"] != "file_stat" {
		t.Errorf("the approver was shown %v", shown)
	}
	if status, body = f.call(t, "alice-a", "GET", base+"?path=/workspace/.env", nil); status != http.StatusLocked {
		t.Errorf("a download under the stat's approval: %d %.80q", status, body)
	}
	for _, r := range ran() {
		if strings.Contains(r, "__file read /workspace/.env") {
			t.Errorf("a download ran under the approval of a stat")
		}
	}
}

// No form of a placeholder's path (a directory here), nor a tree that
// holds it, has fileOp move or remove it.
func TestAttack_FileOpPlaceholderForms(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "ws", "ph", "in"), 0o755)
	os.Symlink("ph", filepath.Join(dir, "ws", "lnk"))
	var st unix.Stat_t
	unix.Lstat(filepath.Join(dir, "ws", "ph"), &st)
	hidden := map[protect.ID]bool{{Dev: st.Dev, Ino: st.Ino}: true}
	ph := filepath.Join(dir, "ws", "ph")
	for _, c := range []struct {
		op, p string
		args  []string
	}{
		{"stat", ph + "/", nil}, {"stat", ph + "/.", nil}, {"stat", dir + "/ws//ph", nil}, {"stat", dir + "/ws/lnk/", nil},
		{"stat", dir + "/ws/lnk/.", nil}, {"stat", ph + "/in/..", nil},
		{"rename", dir + "/ws/lnk/", []string{dir + "/ws/moved"}},
		{"rename", ph + "/in/..", []string{dir + "/ws/moved"}},
		{"remove", dir + "/ws/lnk/", []string{"recursive"}},
		{"remove", ph + "/in/..", []string{"recursive"}},
		{"remove", dir + "/ws", []string{"recursive"}},
		{"rename", dir + "/ws", []string{dir + "/ws2"}},
	} {
		var out bytes.Buffer
		err := fileOp(c.op, c.p, c.args, hidden, &out)
		_, phErr := os.Lstat(ph)
		if phErr != nil {
			t.Errorf("%s %s %v moved or removed the placeholder (err %v)", c.op, strings.TrimPrefix(c.p, dir), c.args, err)
			os.Rename(dir+"/ws2", dir+"/ws")
			os.Rename(dir+"/ws/moved", ph)
		}
	}
}
