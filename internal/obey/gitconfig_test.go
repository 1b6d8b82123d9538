package obey

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitConfigCases are files as git writes them and as people and attackers
// do: the keys ParseGitConfig reads from each (as git config --list
// writes them), or nil for a file it refuses.
var gitConfigCases = []struct {
	name, src string
	want      []string
}{
	{"git init", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
		[]string{"core.repositoryformatversion=0", "core.filemode=true", "core.bare=false", "core.logallrefupdates=true"}},
	{"subsection", "[remote \"origin\"]\n\turl = https://x/y.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
		[]string{"remote.origin.url=https://x/y.git", "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*"}},
	{"case", "[CoRe]\n\tFSMonitor = x\n[Remote \"OriGin\"]\n\tURL = u\n", []string{"core.fsmonitor=x", "remote.OriGin.url=u"}},
	{"legacy subsection", "[remote.OriGin]\n\turl = u\n", []string{"remote.origin.url=u"}},
	{"header and key on one line", "[core] fsmonitor = x\n", []string{"core.fsmonitor=x"}},
	{"two headers on one line", "[user][core]fsmonitor=x", []string{"core.fsmonitor=x"}},
	{"no value", "[core]\n\tbare\n", []string{"core.bare"}},
	{"comments", "# c\n; c\n[core] ; c\n\tpager = less # c\n\teditor = \"vi # not a comment\" ; c\n",
		[]string{"core.pager=less", "core.editor=vi # not a comment"}},
	{"continuation", "[core]\n\tpager = a\\\nb\n", []string{"core.pager=ab"}},
	{"escapes", "[core]\n\tpager = \"a\\tb\\\\c\\\"d\\ne\"\n", []string{"core.pager=a\tb\\c\"d\ne"}},
	{"inner spaces", "[core]\n\tpager =   a  \t b   \n", []string{"core.pager=a    b"}},
	{"quotes inside", "[core]\n\tpager = a\"  \"b\n", []string{"core.pager=a  b"}},
	{"crlf", "[core]\r\n\tpager = x\r\n", []string{"core.pager=x"}},
	{"bom", "\xef\xbb\xbf[core]\n\tpager = x\n", []string{"core.pager=x"}},
	{"no newline at the end", "[core]\n\tpager = x", []string{"core.pager=x"}},
	{"subsection escapes", "[a \"b\\\"c\\\\d\"]\n\tk = v\n", []string{"a.b\"c\\d.k=v"}},
	{"include", "[include]\n\tpath = ../evil\n[includeIf \"gitdir:/x/\"]\n\tpath = y\n", []string{"include.path=../evil", "includeif.gitdir:/x/.path=y"}},
	{"empty", "", []string{}},
	{"dashes and digits", "[x-1]\n\ta-2 = 3\n", []string{"x-1.a-2=3"}},

	{"NUL", "[core]\n\tpager = a\x00b\n", nil},
	{"bare CR", "[core]\r\tfsmonitor = x\n", nil},
	{"key before a section", "fsmonitor = x\n", nil},
	{"unknown escape", "[core]\n\tpager = \\x\n", nil},
	{"unterminated quote", "[core]\n\tpager = \"x\n", nil},
	{"unterminated header", "[core\n\tpager = x\n", nil},
	{"space in a header", "[core x]\n", nil},
	{"dot in a quoted section", "[a.b \"c\"]\n\tk = v\n", nil},
	{"text after a subsection", "[a \"b\" ]\n", nil},
	{"bad key", "[core]\n\t_x = 1\n", nil},
	{"key then garbage", "[core]\n\tx y = 1\n", nil},
	{"key then comment", "[core]\n\tx # c\n", nil},
	{"empty section", "[]\n", nil},
	{"backslash at the end", "[core]\n\tpager = x\\", nil},
	{"subsection unknown escape", "[a \"\\x\"]\n", nil},
}

func keyStrings(keys []GitKey) []string {
	out := []string{}
	for _, k := range keys {
		s := k.Key()
		if !k.NoValue {
			s += "=" + k.Value
		}
		out = append(out, s)
	}
	return out
}

func TestParseGitConfig(t *testing.T) {
	for _, tc := range gitConfigCases {
		keys, err := ParseGitConfig([]byte(tc.src))
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: read %q, want an error", tc.name, keyStrings(keys))
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := keyStrings(keys); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := ParseGitConfig(bytes.Repeat([]byte("#"), MaxGitConfig+1)); err == nil {
		t.Error("a file past the bound was read")
	}
}

// gitList is what git itself reads from a configuration file src, as
// ParseGitConfig's keys would print; ok is false when git refuses it or is
// not installed.
func gitList(t testing.TB, git, src string) ([]string, bool) {
	f := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(git, "config", "--file", f, "--list", "-z")
	cmd.Env = []string{"HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	got := []string{}
	for _, e := range strings.Split(string(out), "\x00") {
		if e == "" {
			continue
		}
		k, v, hasValue := strings.Cut(e, "\n")
		if hasValue {
			k += "=" + v
		}
		got = append(got, k)
	}
	return got, true
}

// What ParseGitConfig reads, git reads the same way: for each file it
// accepts, git config --list lists the same keys and values.
func TestParseGitConfigAsGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git to compare with")
	}
	for _, tc := range gitConfigCases {
		if tc.want == nil {
			continue
		}
		got, ok := gitList(t, git, tc.src)
		if !ok {
			t.Errorf("%s: git refuses what ParseGitConfig reads", tc.name)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: git reads %q, ParseGitConfig %q", tc.name, got, tc.want)
		}
	}
}

// FuzzParseGitConfig: no input makes the parser panic or loop; what it
// reads, written back in canonical form, reads the same; and, where git is
// installed, what it accepts git reads the same way (a parser that read
// a key where git reads another would let that one land unseen).
func FuzzParseGitConfig(f *testing.F) {
	for _, tc := range gitConfigCases {
		f.Add(tc.src)
	}
	git, _ := exec.LookPath("git")
	f.Fuzz(func(t *testing.T, src string) {
		keys, err := ParseGitConfig([]byte(src))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, k := range keys {
			if k.HasSub {
				b.WriteString("[" + k.Section + " \"" + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k.Sub) + "\"]\n")
			} else {
				b.WriteString("[" + k.Section + "]\n")
			}
			if k.NoValue {
				b.WriteString(k.Name + "\n")
				continue
			}
			v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`).Replace(k.Value)
			b.WriteString(k.Name + " = \"" + v + "\"\n")
		}
		again, err := ParseGitConfig([]byte(b.String()))
		if err != nil {
			t.Fatalf("%q read as %q, which written back does not read: %v", src, keyStrings(keys), err)
		}
		if !slices.Equal(keyStrings(again), keyStrings(keys)) {
			t.Fatalf("%q read as %q, written back as %q", src, keyStrings(keys), keyStrings(again))
		}
		if git == "" {
			return
		}
		if got, ok := gitList(t, git, src); ok && !slices.Equal(got, keyStrings(keys)) {
			t.Fatalf("%q: git reads %q, ParseGitConfig %q", src, got, keyStrings(keys))
		}
	})
}

func TestSafeGitKey(t *testing.T) {
	for _, tc := range []struct {
		src  string
		safe bool
	}{
		{"[user]\n\temail = x@y\n\tname = X\n", true},
		{"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n", true},
		{"[remote \"origin\"]\n\turl = git@github.com:a/b.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", true},
		{"[init]\n\tdefaultBranch = main\n", true},
		{"[core]\n\tbare = false\n\tfilemode = true\n\tsymlinks = false\n\tignorecase = true\n\tprecomposeunicode = true\n", true},
		{"[extensions]\n\tobjectformat = sha256\n", true},

		{"[core]\n\tfsmonitor = touch pwned\n", false},
		{"[core]\n\thooksPath = .githooks\n", false},
		{"[core]\n\tsshCommand = x\n", false},
		{"[core]\n\tpager = x\n", false},
		{"[core]\n\teditor = x\n", false},
		{"[core]\n\tworktree = /\n", false},
		{"[core \"x\"]\n\tbare = true\n", false},
		{"[core.x]\n\tbare = true\n", false},
		{"[filter \"lfs\"]\n\tclean = x\n", false},
		{"[diff \"x\"]\n\ttextconv = x\n", false},
		{"[merge \"x\"]\n\tdriver = x\n", false},
		{"[credential]\n\thelper = x\n", false},
		{"[include]\n\tpath = x\n", false},
		{"[includeIf \"onbranch:main\"]\n\tpath = x\n", false},
		{"[alias]\n\tst = !touch x\n", false},
		{"[alias]\n\tst = -c core.pager=x status\n", false},
		{"[remote \"o\"]\n\turl = ext::sh -c touch% x\n", false},
		{"[remote \"o\"]\n\turl = -oProxyCommand=x\n", false},
		{"[remote \"o\"]\n\tuploadpack = x\n", false},
		{"[remote \"o\"]\n\turl\n", false},
		{"[branch \"main\"]\n\tmergeOptions = -s x\n", false},
		{"[init]\n\ttemplateDir = x\n", false},
		{"[extensions]\n\tworktreeConfig = true\n", false},
		{"[user \"x\"]\n\tname = y\n", false},
		{"[core \"\"]\n\tbare = true\n", false},
		{"[remote \"\"]\n\turl = u\n", false},
		{"[gpg]\n\tprogram = x\n", false},
		// A branch's remote that no remote is named is taken as an address.
		{"[branch \"main\"]\n\tremote = ext::sh -c touch% x\n", false},
		{"[branch \"main\"]\n\tpushremote = -oProxyCommand=x\n", false},
	} {
		keys, err := ParseGitConfig([]byte(tc.src))
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		for _, k := range keys {
			if SafeGitKey(k) != tc.safe {
				t.Errorf("%s: safe %v, want %v", k, !tc.safe, tc.safe)
			}
		}
	}
}

func TestGitConfigHeld(t *testing.T) {
	initCfg := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	for _, tc := range []struct {
		name, old, new string
		held           []string // nil: an error
	}{
		{"git init", "", initCfg, []string{}},
		{"user and a remote", initCfg, initCfg + "[user]\n\temail = x\n[remote \"o\"]\n\turl = u\n", []string{}},
		{"fsmonitor added", initCfg, initCfg + "\tfsmonitor = touch pwned\n", []string{"core.fsmonitor = touch pwned"}},
		{"fsmonitor changed", "[core]\n\tfsmonitor = a\n", "[core]\n\tfsmonitor = b\n", []string{"core.fsmonitor = b"}},
		{"fsmonitor as it was", "[core]\n\tfsmonitor = a\n", "[core]\n\tfsmonitor = a\n[user]\n\tname = x\n", []string{}},
		{"fsmonitor removed", "[core]\n\tfsmonitor = a\n", "[user]\n\tname = x\n", []string{}},
		{"reordered values", "[core]\n\tpager = a\n\tpager = b\n", "[core]\n\tpager = b\n\tpager = a\n", []string{"core.pager = b", "core.pager = a"}},
		{"case and form do not hide a key", "[core]\n\tfsmonitor = a\n", "[CORE]\n\tFSMONITOR = b\n", []string{"core.fsmonitor = b"}},
		{"an unreadable old file", "[core\n", "[alias]\n\tx = !y\n", []string{"alias.x = !y"}},
		{"an unreadable new file", initCfg, initCfg + "\tfsmonitor = \"x\n", nil},
		{"removed", initCfg, "", []string{}},
	} {
		held, err := GitConfigHeld([]byte(tc.old), []byte(tc.new))
		if tc.held == nil {
			if err == nil {
				t.Errorf("%s: held %q, want an error", tc.name, held)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if held == nil {
			held = []string{}
		}
		if !slices.Equal(held, tc.held) {
			t.Errorf("%s: held %q, want %q", tc.name, held, tc.held)
		}
	}
}
