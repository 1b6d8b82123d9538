package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approvals"
)

// hostileItem is a held call whose every text an agent, a tool server or
// a profile chose carries a bidirectional override, an escape sequence or
// an invisible character.
func hostileItem() approvals.Item {
	const rlo, esc = "\u202e", "\x1b[2J"
	args, _ := json.Marshal(map[string]string{"path": "notes/" + rlo + "dm.txt" + esc})
	return approvals.Item{
		Request: approvals.Request{ID: "r1", Created: time.Now(), Expires: time.Now().Add(time.Hour), Tool: "write" + rlo, Args: args,
			Class: "write" + esc, Rule: "rule" + rlo, Reason: "why" + rlo + "\u2066", Labels: []string{"secret" + rlo},
			Recent: []approvals.Recent{{Step: 1, Call: "read" + rlo}}, Agent: "a" + rlo, Profile: "p" + rlo, Session: "s" + esc},
		State: approvals.Denied, By: "b" + rlo, Why: "w" + rlo,
	}
}

// raw says what of the characters hostileItem carries reached out.
func raw(out string) []string {
	var found []string
	for _, c := range []string{"\u202e", "\x1b", "\u2066"} {
		if strings.Contains(out, c) {
			found = append(found, c)
		}
	}
	return found
}

// Every text shown to an approver is escaped: cordon approvals list and
// show, and the approvals page (html/template escapes HTML, not these).
func TestApproverTextEscaped(t *testing.T) {
	it := hostileItem()
	var out bytes.Buffer
	showRequest(&env{stdout: &out, stderr: &out}, it)
	if got := raw(out.String()); got != nil {
		t.Errorf("cordon approvals show prints %q raw:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `\u202e`) {
		t.Errorf("cordon approvals show does not show the override escaped:\n%s", out.String())
	}
	out.Reset()
	pending := it
	pending.State = approvals.Pending
	if err := page().Execute(&out, map[string]any{"Pending": []approvals.Item{pending}, "Recent": []approvals.Item{it}, "Name": "ops", "CSRF": "x"}); err != nil {
		t.Fatal(err)
	}
	if got := raw(out.String()); got != nil {
		t.Errorf("the approvals page shows %q raw:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `\u202e`) {
		t.Errorf("the approvals page does not show the override escaped:\n%s", out.String())
	}
}

// cordon approvals list prints each request on one line, escaped.
func TestApprovalsListEscaped(t *testing.T) {
	dir := t.TempDir()
	store, err := approvals.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	it := hostileItem()
	if _, err := store.Add(it.Request); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) (string, bool) { return "", false }, cwd: dir}
	if code := approvalsCmd(e, []string{"list", "--store", dir}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if got := raw(out.String()); got != nil || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("cordon approvals list prints %q raw, or more than one line:\n%s", got, out.String())
	}
}
