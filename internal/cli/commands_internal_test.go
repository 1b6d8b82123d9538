package cli

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// call runs cordon with args through the dispatcher, as Main does, and
// returns its status and output.
func call(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, getenv: func(string) (string, bool) { return "", false }, cwd: t.TempDir()}
	code := dispatch(e, args)
	return code, stdout.String(), stderr.String()
}

// node is a command of the tree with the words that name it.
type node struct {
	path []string
	c    *command
}

func allCommands() []node {
	var out []node
	var walk func(prefix []string, cs []*command)
	walk = func(prefix []string, cs []*command) {
		for _, c := range cs {
			path := append(slices.Clone(prefix), c.name)
			out = append(out, node{path, c})
			walk(path, c.subs)
		}
	}
	walk(nil, commands)
	return out
}

func TestHelpForEveryCommand(t *testing.T) {
	nodes := allCommands()
	if len(nodes) < 30 {
		t.Fatalf("the command tree has %d commands and subcommands; want every one of cordon's", len(nodes))
	}
	for _, n := range nodes {
		for _, args := range [][]string{
			append(slices.Clone(n.path), "-h"),
			append(slices.Clone(n.path), "--help"),
			append(slices.Clone(n.path), "-help"),
			append([]string{"help"}, n.path...),
		} {
			code, stdout, stderr := call(t, args...)
			if code != 0 || stderr != "" {
				t.Errorf("cordon %s: status %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, stderr)
			}
			if !strings.HasPrefix(stdout, "usage: cordon "+n.c.synopsis+"\n") {
				t.Errorf("cordon %s: stdout does not start with the synopsis %q:\n%s", strings.Join(args, " "), n.c.synopsis, stdout)
			}
			if !strings.Contains(stdout, strings.Fields(n.c.long)[0]) {
				t.Errorf("cordon %s: no description in\n%s", strings.Join(args, " "), stdout)
			}
			n.c.flagSet().VisitAll(func(f *flag.Flag) {
				if !strings.Contains(stdout, "\n  "+flagName(f.Name)) {
					t.Errorf("cordon %s: flag %s missing from\n%s", strings.Join(args, " "), flagName(f.Name), stdout)
				}
			})
			for _, s := range n.c.subs {
				if !strings.Contains(stdout, "\n  "+s.name+" ") {
					t.Errorf("cordon %s: subcommand %s missing from\n%s", strings.Join(args, " "), s.name, stdout)
				}
			}
		}
	}
}

func TestHelpOfCordon(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, stdout, _ := call(t, args...)
		if code != 0 {
			t.Errorf("cordon %s: status %d", args[0], code)
		}
		for _, c := range commands {
			if !strings.Contains(stdout, "\n  "+c.synopsis) {
				t.Errorf("cordon %s: %q missing from\n%s", args[0], c.synopsis, stdout)
			}
		}
	}
	// Without a command, the list goes to stderr: it is a mistake.
	code, stdout, stderr := call(t)
	if code != ExitUsage || stdout != "" || !strings.Contains(stderr, "\n  run ") {
		t.Errorf("cordon: status %d, stdout %q, stderr %q; want %d and the commands on stderr", code, stdout, stderr, ExitUsage)
	}
}

func TestUnknownCommands(t *testing.T) {
	check := func(args []string, valid []*command) {
		t.Helper()
		code, stdout, stderr := call(t, args...)
		if code != ExitUsage || stdout != "" {
			t.Errorf("cordon %s: status %d, stdout %q; want %d and nothing", strings.Join(args, " "), code, stdout, ExitUsage)
		}
		if !strings.Contains(stderr, `"frobnicate"`) {
			t.Errorf("cordon %s: stderr does not name the mistake: %q", strings.Join(args, " "), stderr)
		}
		for _, c := range valid {
			if !strings.Contains(stderr, c.name) {
				t.Errorf("cordon %s: stderr does not name %s: %q", strings.Join(args, " "), c.name, stderr)
			}
		}
	}
	check([]string{"frobnicate"}, commands)
	check([]string{"help", "frobnicate"}, commands)
	groups := 0
	for _, n := range allCommands() {
		if len(n.c.subs) == 0 {
			continue
		}
		groups++
		check(append(slices.Clone(n.path), "frobnicate"), n.c.subs)
		check(append(append([]string{"help"}, n.path...), "frobnicate"), n.c.subs)
		if n.c.run == nil {
			// A group without its subcommand is a mistake too.
			code, stdout, stderr := call(t, n.path...)
			if code != ExitUsage || stdout != "" || !strings.Contains(stderr, "usage: cordon "+n.c.synopsis) {
				t.Errorf("cordon %s: status %d, stdout %q, stderr %q; want %d and its usage on stderr", strings.Join(n.path, " "), code, stdout, stderr, ExitUsage)
			}
		}
	}
	if groups < 6 {
		t.Errorf("%d commands have subcommands; want audit, mcp, approvals, serve, profile and completion at least", groups)
	}
}

// -h asks for help where the command would read a flag, and nowhere else:
// after --, or after run's CMD, it belongs to the command run.
func TestWantsHelp(t *testing.T) {
	byName := func(name string) *command {
		for _, c := range commands {
			if c.name == name {
				return c
			}
		}
		t.Fatalf("no command %s", name)
		return nil
	}
	run, lint := byName("run"), byName("lint")
	for _, tc := range []struct {
		c    *command
		args []string
		want bool
	}{
		{run, []string{"-h"}, true},
		{run, []string{"--profile", "p.yaml", "--help"}, true},
		{run, []string{"--profile", "-h"}, false},
		{run, []string{"--", "ls", "-h"}, false},
		{run, []string{"ls", "-h"}, false},
		{lint, []string{"p.yaml", "-h"}, true},
		{lint, []string{"--", "-h"}, false},
	} {
		if got := tc.c.wantsHelp(tc.args); got != tc.want {
			t.Errorf("cordon %s %s: wantsHelp %v, want %v", tc.c.name, strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// The flags a command parses when it runs are the flags it describes; a
// flag it does not know is named in one line, with the closest it has,
// and its help is not printed.
func TestDescribedFlagsAreParsed(t *testing.T) {
	var sets []*flag.FlagSet
	parsed = func(fs *flag.FlagSet) { sets = append(sets, fs) }
	defer func() { parsed = nil }()
	for _, n := range allCommands() {
		if n.c.flags == nil || n.c.run == nil {
			continue
		}
		sets = nil
		args := append(slices.Clone(n.path), "--no-such-flag")
		code, _, stderr := call(t, args...)
		if code == 0 {
			t.Errorf("cordon %s: status 0", strings.Join(args, " "))
			continue
		}
		if want := "unknown flag --no-such-flag"; !strings.Contains(stderr, want) || strings.Contains(stderr, "usage:") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("cordon %s: stderr %q, want one line saying %q", strings.Join(args, " "), stderr, want)
		}
		if len(sets) == 0 {
			t.Errorf("cordon %s parses its flags without parseFlags", strings.Join(n.path, " "))
			continue
		}
		var got, described []string
		sets[len(sets)-1].VisitAll(func(f *flag.Flag) { got = append(got, f.Name) })
		n.c.flagSet().VisitAll(func(f *flag.Flag) { described = append(described, f.Name) })
		if !slices.Equal(got, described) {
			t.Errorf("cordon %s parses the flags %v but describes %v", strings.Join(n.path, " "), got, described)
		}
	}
}

// A mistyped flag is met with the one it was near.
func TestMistypedFlag(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"run --limt wall=1s -- true", "run: unknown flag --limt; did you mean --limit? (cordon help run lists the flags)"},
		{"run --proflie p.yaml -- true", "did you mean --profile?"},
		{"lint --fail-onn warning", "did you mean --fail-on?"},
		{"run --workspac . -- true", "did you mean --workspace?"},
		{"run --zzzz -- true", "run: unknown flag --zzzz (cordon help run lists the flags)"},
		{"run --zz -- true", "run: unknown flag --zz (cordon help run lists the flags)"},
		{"run --profile", "run: flag needs an argument: --profile (cordon help run lists the flags)"},
		{"run --json=maybe -- true", `run: invalid boolean value "maybe" for --json: parse error (cordon help run lists the flags)`},
	} {
		code, _, stderr := call(t, strings.Fields(tc.args)...)
		if code != ExitCordon || !strings.Contains(stderr, tc.want) {
			t.Errorf("cordon %s: status %d, stderr %q; want %d and %q", tc.args, code, stderr, ExitCordon, tc.want)
		}
	}
}

func script(t *testing.T, shell string) string {
	t.Helper()
	code, stdout, stderr := call(t, "completion", shell)
	if code != 0 || stderr != "" {
		t.Fatalf("cordon completion %s: status %d, stderr %q", shell, code, stderr)
	}
	for _, n := range allCommands() {
		if !strings.Contains(stdout, n.c.name) {
			t.Errorf("the %s script does not name %s", shell, strings.Join(n.path, " "))
		}
	}
	file := filepath.Join(t.TempDir(), "cordon."+shell)
	if err := os.WriteFile(file, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func needShell(t *testing.T, shell string) string {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		t.Skipf("%s is not installed", shell)
	}
	return path
}

// complete drives a completion in shell, with the script and a file
// "profile.yaml" in the work directory; driver prints the candidates of
// the words in $line.
func complete(t *testing.T, shell, file, driver, line string) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "profile.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-c", driver, shell, file, line}
	if shell == "fish" {
		// fish has no $0: the words after the command are $argv.
		args = []string{"-c", driver, file, line}
	}
	cmd := exec.Command(needShell(t, shell), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s completing %q: %v\n%s", shell, line, err, out)
	}
	return strings.Fields(string(out))
}

func TestCompletionBash(t *testing.T) {
	file := script(t, "bash")
	const driver = `source "$1" || exit 1
read -r -a COMP_WORDS <<<"$2"
[[ $2 == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_cordon
printf '%s\n' "${COMPREPLY[@]}"`
	for line, want := range map[string][]string{
		"cordon ru":                      {"run"},
		"cordon run --pro":               {"--profile"},
		"cordon audit ":                  {"verify", "show", "keygen"},
		"cordon audit verify --":         {"--key", "--log"},
		"cordon run --profile prof":      {"profile.yaml"},
		"cordon run --profile x --rev":   {"--review"},
		"cordon mcp t":                   {"tools"},
		"cordon approvals s":             {"show", "serve"},
		"cordon completion ":             {"bash", "zsh", "fish"},
		"cordon serve --listen ":         nil,
		"cordon run --workspace . -- ru": nil,
	} {
		got := complete(t, "bash", file, driver, line)
		if !slices.Equal(got, want) {
			t.Errorf("bash: %q completes to %q, want %q", line, got, want)
		}
	}
}

func TestCompletionZsh(t *testing.T) {
	file := script(t, "zsh")
	if out, err := exec.Command(needShell(t, "zsh"), "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	// The walk over the words, in zsh's own word splitting.
	const driver = `compdef() { :; }
source "$1" || exit 1
__cordon_walk ${=2}
print -r -- "path=${cmdpath// /+}"
__cordon_kind "$cmdpath" --profile`
	for line, want := range map[string][]string{
		"run --profile x --rev": {"path=run", "file"},
		"audit verify --log":    {"path=audit+verify"},
		"mcp --profile tools":   {"path=mcp", "file"},
	} {
		got := complete(t, "zsh", file, driver, line)
		if !slices.Equal(got, want) {
			t.Errorf("zsh: %q walks to %q, want %q", line, got, want)
		}
	}
}

func TestCompletionFish(t *testing.T) {
	file := script(t, "fish")
	if out, err := exec.Command(needShell(t, "fish"), "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("fish -n: %v\n%s", err, out)
	}
	const driver = `source $argv[1]; or exit 1
complete -C $argv[2] | string replace -r '\t.*' ''
true`
	for line, want := range map[string][]string{
		"cordon ru":                 {"run"},
		"cordon run --pro":          {"--profile"},
		"cordon audit ":             {"keygen", "show", "verify"},
		"cordon run --profile prof": {"profile.yaml"},
	} {
		got := complete(t, "fish", file, driver, line)
		if !slices.Equal(got, want) {
			t.Errorf("fish: %q completes to %q, want %q", line, got, want)
		}
	}
}

func TestManPage(t *testing.T) {
	code, page, stderr := call(t, "man")
	if code != 0 || stderr != "" {
		t.Fatalf("cordon man: status %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(page, ".TH CORDON 1 ") {
		t.Fatalf("cordon man does not start with .TH CORDON 1:\n%.200s", page)
	}
	for _, n := range allCommands() {
		if !strings.Contains(page, ".SS "+roffQuoted("cordon "+n.c.synopsis)+"\n") {
			t.Errorf("cordon man: no section for cordon %s", strings.Join(n.path, " "))
		}
		n.c.flagSet().VisitAll(func(f *flag.Flag) {
			if !strings.Contains(page, roffText(flagName(f.Name))) {
				t.Errorf("cordon man: no flag %s of cordon %s", flagName(f.Name), strings.Join(n.path, " "))
			}
		})
	}
	file := filepath.Join(t.TempDir(), "cordon.1")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff is not installed: the page's rendering is not checked")
	}
	// -ww: every warning; -z: no output but the warnings.
	out, err := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", file).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("groff warns about cordon man: %v\n%s", err, out)
	}
}
