package cli_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docVar is a row of docs/PROFILES.md's table of the variables a command
// of the default profile sees.
type docVar struct {
	name, value string // value "" : not a literal (cordon's own)
	when        string
}

// documentedEnvironment reads that table.
func documentedEnvironment(t *testing.T) []docVar {
	t.Helper()
	f, err := os.Open("../../docs/PROFILES.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([A-Za-z_][A-Za-z0-9_]*)` \\| ([^|]+) \\| ([^|]+) \\|$")
	var vars []docVar
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "| variable | value | when |":
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && row.MatchString(line):
			m := row.FindStringSubmatch(line)
			v := docVar{name: m[1], when: strings.TrimSpace(m[3])}
			if val := strings.TrimSpace(m[2]); strings.HasPrefix(val, "`") && strings.HasSuffix(val, "`") {
				v.value = strings.Trim(val, "`")
			}
			vars = append(vars, v)
		case in:
			in = false
		}
	}
	if len(vars) < 10 {
		t.Fatalf("docs/PROFILES.md: the table of the sandbox's environment has %d rows", len(vars))
	}
	return vars
}

// TestDocumentedEnvironment runs `env` in sandboxes of the default profile
// (without network, with an allowlist, with an allowlist naming a
// loopback destination) and holds docs/PROFILES.md's table to what each
// sees: every variable the sandbox has is in the table, with its value,
// and every variable of the table is there exactly when it says.
func TestDocumentedEnvironment(t *testing.T) {
	cordon := filepath.Join(binDir, "cordon")
	if exec.Command(cordon, "doctor").Run() != nil {
		t.Skip("this host cannot create cordon sandboxes (see cordon doctor)")
	}
	docs := documentedEnvironment(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	host := map[string]string{"LANG": "C.UTF-8", "TERM": "dumb"}
	repo := filepath.Join(tmp, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	_, noGit := exec.LookPath("git")
	if noGit == nil {
		if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
	}
	for _, c := range []struct {
		name     string
		flags    []string
		network  bool
		loopback bool
		repo     bool
	}{
		{"no network", nil, false, false, false},
		{"network", []string{"--allow", "example.com:443"}, true, false, false},
		{"network to a loopback destination", []string{"--allow", "127.0.0.1:8080"}, true, true, false},
		{"a git repository", nil, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.repo && noGit != nil {
				t.Skip("git is not installed")
			}
			cmd := exec.Command(cordon, append(append([]string{"run"}, c.flags...), "--", "env")...)
			cmd.Dir = ws
			if c.repo {
				cmd.Dir = repo
			}
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=" + host["LANG"], "TERM=" + host["TERM"], "HOME=" + tmp,
				"CORDON_STATE_DIR=" + filepath.Join(tmp, "state"), "CORDON_AUDIT_LOG=" + filepath.Join(tmp, "audit.jsonl"),
				"NOT_PASSED=x"}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("cordon run %v -- env: %v\n%s", c.flags, err, out)
			}
			seen := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				seen[k] = v
			}
			var want []string
			for _, d := range docs {
				var present bool
				switch d.when {
				case "always", "passed, when cordon has it", "caches":
					present = true
				case "network":
					present = c.network
				case "network, unless the allowlist names a loopback destination":
					present = c.network && !c.loopback
				case "caches, without network":
					present = !c.network
				case "placeholders":
					present = true
				case "placeholders, the workspace no repository":
					present = !c.repo
				default:
					t.Fatalf("docs/PROFILES.md: %s is set %q, which this test does not know", d.name, d.when)
				}
				if !present {
					continue
				}
				want = append(want, d.name)
				v, ok := seen[d.name]
				switch {
				case !ok:
					t.Errorf("%s is documented (%s) and the sandbox has none", d.name, d.when)
				case d.value != "" && v != d.value:
					t.Errorf("%s is %q in the sandbox, documented as %q", d.name, v, d.value)
				case d.value == "" && host[d.name] != "" && v != host[d.name]:
					t.Errorf("%s is %q in the sandbox, cordon's is %q", d.name, v, host[d.name])
				}
			}
			for k, v := range seen {
				if !slices.Contains(want, k) {
					t.Errorf("the sandbox has %s=%q, which docs/PROFILES.md does not list for this case", k, v)
				}
			}
		})
	}
}
