package obey

import (
	"net/url"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		tool string // "" for no match
	}{
		{".git/config", "git"},
		{"sub/.git", "git"},
		{"sub/deep/.git/hooks/pre-commit", "git"},
		{"HEAD", "git"},
		{"pkg/HEAD", "git"},
		{".gitmodules", "git"},
		{".hg/hgrc", "Mercurial (hg)"},
		{"vendor/x/.hg/hgrc", "Mercurial (hg)"},
		{".jj/repo/config.toml", "Jujutsu (jj)"},
		{".yarnrc.yml", "npm, yarn, pnpm"},
		{"app/.npmrc", "npm, yarn, pnpm"},
		{".pnpmfile.cjs", "npm, yarn, pnpm"},
		{".yarn/plugins/p.cjs", "yarn"},
		{"mise.toml", "mise, asdf"},
		{".tool-versions", "mise, asdf"},
		{".venv/lib/python3.11/site-packages/evil.pth", "Python (site), pip"},
		{".venv/pip.conf", "Python (site), pip"},
		{".venv/bin/activate", "Python (site), pip"},
		{".cargo/config.toml", "cargo"},
		{".vscode/tasks.json", "editors"},
		{".zed/settings.json", "editors"},
		{"x.code-workspace", "editors"},
		{".nvim.lua", "editors"},
		{".claude/settings.json", "coding agents"},
		{".mcp.json", "coding agents"},
		{".github/workflows/ci.yml", "CI"},
		{".husky/pre-commit", "hook managers"},
		{".bashrc", "shells, git, ripgrep"},
		{".cordon/mcp.yaml", "cordon"},
		{"agent.approval.yaml", "cordon"},
		{"profiles/a.approval.yaml", "cordon"},
		// Not obeyed: names that only resemble.
		{"src/main.go", ""},
		{"my.git/x", ""},
		{"HEADER.md", ""},
		{"docs/.github/README.md", ""},
		{"notgit/.gitx", ""},
		{".envrc.example", ""},
		{"x.pth.txt", ""},
	} {
		e := Match(tc.rel)
		got := ""
		if e != nil {
			got = e.Tool
		}
		if got != tc.tool {
			t.Errorf("Match(%q) = %q, want %q", tc.rel, got, tc.tool)
		}
	}
}

// Every entry says what it obeys, where from, and cites a source; every
// placeholder is a single name direct mode can make at a root.
func TestCatalogComplete(t *testing.T) {
	for _, e := range Catalog {
		if e.Tool == "" || e.Obeys == "" || e.Where == "" || e.Source == "" {
			t.Errorf("%+v: an entry names its tool, what it obeys, where from and its source", e)
		}
		if len(e.Names)+len(e.Globs) == 0 {
			t.Errorf("%s: matches nothing", e.Tool)
		}
		for _, s := range strings.Split(e.Source, ", ") {
			if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && !strings.HasPrefix(s, "docs/")) {
				t.Errorf("%s: source %q is not a public address or a document of cordon's", e.Tool, s)
			}
		}
	}
	always, ifPresent := RootNames()
	for _, want := range []string{".git", ".hg", ".jj", ".yarnrc.yml", ".npmrc", ".cordon", ".vscode"} {
		if !contains(always, want) {
			t.Errorf("%s is not kept at a root where absent: %v", want, always)
		}
	}
	if !contains(ifPresent, ".bashrc") || contains(always, ".bashrc") {
		t.Errorf(".bashrc is kept where present only: %v / %v", always, ifPresent)
	}
	if len(NotCovered) == 0 {
		t.Error("the catalog says what it does not cover")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestGitDir(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		dir   string
		want  bool
	}{
		{"HEAD alone", []string{"HEAD"}, ".", true},
		{"commondir", []string{"x/commondir"}, "x", true},
		{"objects and refs, no HEAD yet", []string{"objects", "refs", "config"}, ".", true},
		{"objects alone", []string{"objects", "config"}, ".", false},
		{"refs alone", []string{"sub/refs"}, "sub", false},
		{"elsewhere", []string{"a/HEAD"}, "b", false},
	} {
		has := func(rel string) bool { return contains(tc.paths, rel) }
		if got := GitDir(has, tc.dir); got != tc.want {
			t.Errorf("%s: GitDir = %v, want %v", tc.name, got, tc.want)
		}
	}
	for rel, want := range map[string]bool{"config": true, "hooks/pre-commit": true, "info/attributes": true, "objects/ab/cd": false, "refs/heads/main": false, "configs": false} {
		if IsGitObeyed(rel) != want {
			t.Errorf("IsGitObeyed(%q) = %v", rel, !want)
		}
	}
}

func TestContent(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       bool
	}{
		{"profile", "version: 1\nagent: x\nworkspace: {path: ., mode: direct}\n", true},
		{"flow style on one line", `{version: 1, agent: x, mounts: [{path: /home}]}`, true},
		{"JSON", `{"version": 1, "agent": "x"}`, true},
		{"escaped key", `{"version": 1, "\x61gent": "x"}`, true},
		{"escapes with digits no hexadecimal ones", "\"\\x5Version\": 1\n\"\\x4Qgent\": x\n", true},
		{"every letter escaped", `{"\u0076\x65rsion": 1, "\U00000061gent": "x"}`, true},
		{"explicit key split by an escaped line break", "? \"ver\\\n    sion\"\n: 1\nagent: x\n", true},
		{"key in an anchored mapping, merged", "base: &b {agent: x}\n<<: *b\nversion: 1\n", true},
		{"comments first", "# a profile\n\n---\nversion: 1\n# agent\nagent: x\n", true},
		{"approval record", "agent: x\nprofile_sha256: ab\napproved_by: alice\n", true},
		{"nested keys only", "tools:\n  version: 1\n  agent: x\n", false},
		{"package.json", `{"name": "x", "version": "1.0.0"}`, false},
		{"not YAML", "func main() { a: b }\n\t:::\n", false},
		{"empty", "", false},
	} {
		if got := Content([]byte(tc.data)) != nil; got != tc.want {
			t.Errorf("%s: Content = %v, want %v", tc.name, got, tc.want)
		}
	}
	// An alias standing for a node that holds it, many times over, is
	// looked at within a bound, not without end.
	bomb := "a: &a [*a, *a, *a, *a, *a, *a, *a, *a]\n<<: [*a, *a, *a, *a, *a, *a, *a, *a]\nversion: 1\n"
	if Content([]byte(bomb)) != nil {
		t.Error("a document without agent is taken as a profile")
	}
	big := "version: 1\nagent: x\n# " + strings.Repeat("x", MaxContent) + "\n"
	if Content([]byte(big)) != nil {
		t.Error("a file larger than any profile cordon reads is taken as one")
	}
}

func FuzzContent(f *testing.F) {
	f.Add([]byte("version: 1\nagent: x\n"))
	f.Add([]byte("&a [*a, *a]"))
	f.Add([]byte("a: &a [*a, *a, *a, *a]\n<<: *a\n"))
	f.Add([]byte(`{"\x76ersion": 1, "ag\u0065nt": "x"}`))
	f.Add([]byte("\"\\x5Version\": 1\n\"\\x4Qgent\": x\n"))
	f.Add([]byte("\"v\\u00e\u00e9rsion\": 1\nagent: x\n"))
	f.Add([]byte("\"ver\\\r\n sion\": 1\nagent: x\n"))
	// The test before the parse never turns away what the parse takes.
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) <= MaxContent && !mayHoldKeys(data) {
			if keys := topKeys(data); keys["version"] && keys["agent"] || keys["profile_sha256"] && keys["approved_by"] {
				t.Fatalf("%q: the parse reads %v, the test before it found no pair", data, keys)
			}
		}
		Content(data)
	})
}

// A link whose name begins a name of the catalog of several parts stands
// in for it (what is written through it lands under another name); one
// whose name the catalog has no part of does not.
func TestLinkMatch(t *testing.T) {
	for _, tc := range []struct{ rel, tool string }{
		{".github", "CI"},
		{"sub/.github", "CI"},
		{".yarn", "yarn"},
		{".config", "mise"},
		{"venv/bin", "pip"},
		{".vscode", "editors"},
		{"docs", ""},
		{"github", ""},
		{".github.bak", ""},
	} {
		e := LinkMatch(tc.rel)
		got := ""
		if e != nil {
			got = e.Tool
		}
		if !strings.Contains(got, tc.tool) || (tc.tool == "") != (got == "") {
			t.Errorf("LinkMatch(%q) = %q, want %q", tc.rel, got, tc.tool)
		}
	}
}
