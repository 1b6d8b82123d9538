package server

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"unicode"
)

// The page puts every text the API carries on the page escaped: a
// bidirectional override, a control or an invisible character in an
// approval's arguments, a file's name or a diff is shown as a \u escape,
// line feeds kept. The page's own script runs in node, its document a
// stand-in that keeps what is put in it.
func TestUIShowsTextEscaped(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node")
	}
	app, err := uiFiles.ReadFile("ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	stub := `
const kept = [];
globalThis.document = {
  addEventListener() {}, querySelector() { return null; },
  createElement(tag) { return { tag, className: "", setAttribute() {}, addEventListener() {}, append(...c) { kept.push(...c); } }; },
};
globalThis.sessionStorage = { getItem() { return ""; } };
`
	check := `
el("pre", {}, "{\n  \"path\": \"notes/\u202edm.txt\u001b[2J\"\n}", 7);
el("p", {}, "why\u2066\u200b");
process.stdout.write(JSON.stringify(kept));
`
	cmd := exec.Command(node, "-e", stub+string(app)+check)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var kept []string
	if err := json.Unmarshal(out, &kept); err != nil || len(kept) != 3 {
		t.Fatalf("what the page put on it: %s (%v)", out, err)
	}
	for _, k := range kept {
		for _, r := range k {
			if r != '\n' && (r < 0x20 || r == 0x7f || unicode.Is(unicode.Cf, r)) {
				t.Errorf("the page puts %U on it raw: %q", r, k)
			}
		}
	}
	if !strings.Contains(kept[0], `\u202e`) || !strings.Contains(kept[0], `\u001b`) || !strings.Contains(kept[0], "\n") || kept[1] != "7" || kept[2] != `why\u2066\u200b` {
		t.Errorf("the page's text: %q", kept)
	}
}
