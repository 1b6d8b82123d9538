package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
)

// hostile is what an agent may put in what it sends: an escape sequence
// that clears the screen, and a right-to-left override that shows
// "rm -rf /txt.exe" backwards.
const hostile = "rm -rf /\u202eexe.txt\x1b[2J\u2066"

// audit show prints no control or bidirectional character an agent
// chose, in its table or as JSON.
func TestAuditShowEscapes(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(file, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Add(audit.Event{Sandbox: "sb-1\u202e", Kind: audit.Action, Type: "exec", Data: map[string]any{"argv": []string{"sh", "-c", hostile}, "cwd": "/w\u202e"}},
		audit.Event{Sandbox: "sb-1", Kind: audit.Decision, Type: "other\u202e", Data: map[string]any{"x": hostile}})
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Seal()
	for _, args := range [][]string{{"--log", file}, {"--log", file, "--json"}} {
		var out, errs bytes.Buffer
		e := &env{stdout: &out, stderr: &errs}
		if code := auditShow(e, args); code != 0 {
			t.Fatalf("audit show %v: %d %s", args, code, errs.String())
		}
		got := out.String()
		if strings.ContainsAny(got, "\u202e\u2066\x1b") || !strings.Contains(got, `\u202e`) {
			t.Errorf("audit show %v printed:\n%q", args, got)
		}
		if args[len(args)-1] == "--json" {
			for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
				var r shown
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Errorf("not JSON: %q: %v", line, err)
				}
			}
			if !strings.Contains(got, `rm -rf /\u202eexe.txt\u001b[2J\u2066`) {
				t.Errorf("the argument, as JSON: %s", got)
			}
		}
	}
}

// approvals show lays out a held command's fields one a line, stdin's
// preview escaped.
func TestApprovalsShowWholeRequest(t *testing.T) {
	args, _ := json.Marshal(map[string]any{"args": []string{"sh"}, "dir": "/workspace", "env": map[string]string{"MODE": "safe"},
		"stdin": map[string]any{"bytes": 11, "sha256": "ab12", "preview": "echo benign"}})
	var out bytes.Buffer
	showRequest(&env{stdout: &out}, approvals.Item{Request: approvals.Request{Tool: "exec", Args: args, Reason: "held " + hostile}})
	got := out.String()
	lines := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{`"sha256": "ab12"`, `"preview": "echo benign",`, `"dir": "/workspace",`, `"MODE": "safe"`} {
		if !lines[want] {
			t.Errorf("approvals show lacks %q:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\u202e\x1b") {
		t.Errorf("approvals show printed control characters:\n%q", got)
	}
}
