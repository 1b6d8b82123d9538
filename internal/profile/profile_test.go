package profile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultProfile(t *testing.T) {
	p := Default()
	if p.Agent != "default" || p.Hostname != "cordon" {
		t.Errorf("agent/hostname: got %q/%q", p.Agent, p.Hostname)
	}
	if p.User.UID == 0 || p.User.GID == 0 {
		t.Errorf("default user is root: %+v", p.User)
	}
	if !p.Workspace.Writable || p.Workspace.Path != "." {
		t.Errorf("workspace: got %+v, want . read-write", p.Workspace)
	}
	for _, m := range p.Mounts {
		if m.Writable {
			t.Errorf("default mount %s is writable", m.Path)
		}
		if m.Path == "/etc" || m.Path == "/home" || m.Path == "/root" || strings.HasPrefix(m.Path, "/home/") {
			t.Errorf("default profile binds %s", m.Path)
		}
	}
	if p.Resources.TmpSize.N != 256<<20 {
		t.Errorf("tmp_size: got %d", p.Resources.TmpSize.N)
	}
}

func TestEnviron(t *testing.T) {
	p := Default()
	host := map[string]string{"LANG": "C.UTF-8", "SECRET_TOKEN": "x", "PATH": "/host/bin", "HOME": "/root"}
	got := p.Environ(func(k string) (string, bool) { v, ok := host[k]; return v, ok })
	want := []string{"HOME=/home/agent", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
}

const minimal = "version: 1\nagent: a\n"

// parseErrorCases are profiles the loader refuses, with the first error
// it reports; the schema test also holds the schema to those refused for
// their structure.
var parseErrorCases = []struct {
	name  string
	src   string
	line  int
	col   int
	field string
	msg   string
}{
	{"unknown field", minimal + "bogus: 1\n", 3, 1, "bogus", `unknown field "bogus"`},
	{"unknown nested field", minimal + "mounts:\n  - path: /usr\n    bogus: 1\n", 5, 5, "mounts[0].bogus", `unknown field "bogus"`},
	{"wrong type", minimal + "user:\n  uid: abc\n", 4, 8, "user.uid", "want a whole number, found a string"},
	{"relative mount", minimal + "mounts:\n  - path: usr\n", 4, 11, "mounts[0].path", "must be an absolute path"},
	{"unclean mount", minimal + "mounts:\n  - path: /usr/../etc\n", 4, 11, "mounts[0].path", "not clean"},
	{"root mount", minimal + "mounts:\n  - path: /\n", 4, 11, "mounts[0].path", "whole host root"},
	{"etc wholesale", minimal + "mounts:\n  - path: /etc\n", 4, 11, "mounts[0].path", "not bound wholesale"},
	{"reserved proc", minimal + "mounts:\n  - path: /srv\n    target: /proc/x\n", 5, 13, "mounts[1-1].target", "reserved"},
	{"duplicate target", minimal + "mounts:\n  - path: /usr\n  - path: /opt\n    target: /usr\n", 6, 13, "mounts[1].target", "already the target"},
	{"hides home", minimal + "mounts:\n  - path: /home\n", 4, 11, "mounts[0].path", "would hide the sandbox user's home"},
	{"root user", minimal + "user:\n  uid: 0\n", 4, 8, "user.uid", "never root"},
	{"bad size", minimal + "resources:\n  tmp_size: 12Q\n", 4, 13, "resources.tmp_size", "not a size"},
	{"limit as a list", minimal + "resources:\n  memory: [1]\n", 4, 11, "resources.memory", "want a string, found a list"},
	{"tool without class", minimal + "tools:\n  fetch:\n    returns: [untrusted]\n", 4, 3, "tools.fetch.class", "missing: say what a call does"},
	{"tool class", minimal + "tools:\n  fetch:\n    class: network\n", 5, 12, "tools.fetch.class", `"network" is not a class`},
	{"unknown label", minimal + "tools:\n  fetch:\n    class: external\n    accepts: [secrets]\n", 6, 15, "tools.fetch.accepts[0]", `unknown label "secrets"`},
	{"label rule without match", minimal + "tools:\n  read_file:\n    class: read\n    labels:\n      - arg: path\n        labels: [secret]\n", 7, 12, "tools.read_file.labels[0]", "give a glob, a prefix or a suffix"},
	{"label glob", minimal + "tools:\n  read_file:\n    class: read\n    labels:\n      - arg: path\n        glob: '**/.env**'\n        labels: [secret]\n", 8, 15, "tools.read_file.labels[0].glob", "whole names only"},
	{"paths of a built-in", minimal + "tools:\n  read_file:\n    class: read\n    paths: [path]\n", 6, 5, "tools.read_file.paths", "only a tool of a server"},
	{"path named twice", minimal + "servers:\n  fs:\n    url: https://x.example/\ntools:\n  fs__read:\n    class: read\n    paths: [path, path]\n", 9, 19, "tools.fs__read.paths[1]", "named twice"},
	{"bad constraint", minimal + "tools:\n  fetch:\n    class: external\n    constraints: ['args.url.lower() == \"x\"']\n", 6, 19, "tools.fetch.constraints[0]", "column 10: undeclared method lower()"},
	{"server without profile", minimal + "servers:\n  fs:\n    command: [mcp-fs]\n", 4, 3, "servers.fs.profile", "missing: a server runs in a sandbox of its own profile"},
	{"server twice over", minimal + "servers:\n  fs:\n    command: [mcp-fs]\n    url: https://x.example/mcp\n", 4, 3, "servers.fs", "a command or a url, not both"},
	{"server url", minimal + "servers:\n  fs:\n    url: ftp://x.example/\n", 5, 10, "servers.fs.url", "not an http or https URL"},
	{"server name", minimal + "servers:\n  a__b:\n    url: https://x.example/\n", 4, 3, "servers.a__b", "not a valid server name"},
	{"tool of no server", minimal + "tools:\n  fs__read:\n    class: read\n", 4, 3, "tools.fs__read", `no server "fs" under servers`},
	{"bad pin", minimal + "servers:\n  fs:\n    url: https://x.example/\ntools:\n  fs__read:\n    class: read\n    pin: abc\n", 9, 10, "tools.fs__read.pin", "not sha256: and 64 lowercase hex digits"},
	{"pin of a built-in", minimal + "tools:\n  fetch:\n    class: external\n    pin: sha256:00\n", 6, 10, "tools.fetch.pin", "only a tool of a server under servers has a pin"},
	{"approval class", minimal + "approval:\n  classes: [dangerous]\n", 4, 13, "approval.classes[0]", `"dangerous" is not a class`},
	{"approval via", minimal + "approval:\n  via: email\n", 4, 8, "approval.via", `"email" is not a way to ask`},
	{"approval timeout", minimal + "approval:\n  timeout: later\n", 4, 12, "approval.timeout", `"later" is not a duration`},
	{"approval of no tool", minimal + "approval:\n  tools:\n    pay:\n      required: true\n", 5, 5, "approval.tools.pay", "pay is not a tool of this profile"},
	{"approval threshold", minimal + "tools:\n  pay:\n    class: financial\napproval:\n  tools:\n    pay:\n      when: 'args.amount >'\n", 9, 13, "approval.tools.pay.when", "unexpected end of expression"},
	{"drift interval", minimal + "drift:\n  every: 1ms\n", 4, 10, "drift.every", "at least 100ms"},
	{"drift action", minimal + "drift:\n  action: ignore\n", 4, 11, "drift.action", `"ignore" is not an action`},
	{"session wall", minimal + "session:\n  wall: soon\n", 4, 9, "session.wall", `"soon" is not a duration`},
	{"own label twice", minimal + "labels: [secret]\n", 3, 10, "labels[0]", `"secret" is already a label`},
	{"tiny size", minimal + "resources:\n  tmp_size: 1k\n", 4, 13, "resources.tmp_size", "below the smallest tmp_size, 1MiB"},
	{"negative size", minimal + "resources:\n  tmp_size: -5MiB\n", 4, 13, "resources.tmp_size", "negative"},
	{"bad env name", minimal + "env:\n  pass: [\"A-B\"]\n", 4, 10, "env.pass[0]", "not a valid environment variable name"},
	{"missing version", "agent: a\n", 0, 0, "version", "missing"},
	{"wrong version", "version: 2\nagent: a\n", 1, 10, "version", "unsupported version 2"},
	{"missing agent", "version: 1\n", 0, 0, "agent", "missing"},
	{"bad hostname", minimal + "hostname: a_b\n", 3, 11, "hostname", "not a valid host name"},
	{"syntax error", minimal + "mounts: [\n", 3, 9, "", "not found"},
	{"duplicate key", minimal + "agent: b\n", 3, 1, "", "already defined"},
	{"empty", "  \n", 0, 0, "", "empty"},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range parseErrorCases {
		t.Run(tt.name, func(t *testing.T) {
			tt.field = strings.ReplaceAll(tt.field, "[1-1]", "[0]")
			_, err := Parse("p.yaml", []byte(tt.src))
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("got %v, want profile errors", err)
			}
			e := errs[0]
			if e.File != "p.yaml" || e.Line != tt.line || (tt.col != 0 && e.Col != tt.col) || e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got %q (line %d col %d field %q), want line %d col %d field %q message containing %q",
					e.Error(), e.Line, e.Col, e.Field, tt.line, tt.col, tt.field, tt.msg)
			}
			if tt.line > 0 && !strings.HasPrefix(e.Error(), "p.yaml:") {
				t.Errorf("message %q does not start with file:line:col", e.Error())
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	src := minimal + "user:\n  uid: 0\nmounts:\n  - path: usr\nresources:\n  tmp_size: x\n"
	_, err := Parse("p.yaml", []byte(src))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v", err)
	}
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	want := []string{"user.uid", "mounts[0].path", "resources.tmp_size"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestParseFull(t *testing.T) {
	src := `version: 1
agent: reviewer
hostname: box
user:
  name: bot
  uid: 2000
workspace:
  path: /srv/repo
  target: /work
  writable: false
mounts:
  - path: /usr
  - path: /data
    target: /mnt/data
    writable: true
env:
  set:
    FOO: bar
  pass: [TERM]
resources:
  tmp_size: 1.5GiB
`
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.User.GID != 2000 {
		t.Errorf("gid defaults to uid: got %d", p.User.GID)
	}
	if p.User.Home() != "/home/bot" {
		t.Errorf("home: got %s", p.User.Home())
	}
	if got := p.Resources.TmpSize.N; got != 3<<29 {
		t.Errorf("tmp_size: got %d", got)
	}
	if p.Mounts[1].Dest() != "/mnt/data" || !p.Mounts[1].Writable {
		t.Errorf("mount: got %+v", p.Mounts[1])
	}
}

func TestAddMount(t *testing.T) {
	p := Default()
	n := len(p.Mounts)
	if err := p.AddMount("/srv", false); err != nil {
		t.Fatal(err)
	}
	if err := p.AddMount("/usr", true); err != nil {
		t.Fatal(err)
	}
	if len(p.Mounts) != n+1 {
		t.Errorf("got %d mounts, want %d", len(p.Mounts), n+1)
	}
	i := slices.IndexFunc(p.Mounts, func(m Mount) bool { return m.Path == "/usr" })
	if !p.Mounts[i].Writable {
		t.Error("--rw /usr did not replace the read-only /usr")
	}
	for _, bad := range []string{"rel", "/", "/home", "/proc/x", "/tmp", "/etc"} {
		if err := p.AddMount(bad, false); err == nil {
			t.Errorf("AddMount(%q) accepted", bad)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"4096", 4096, false}, {"512MiB", 512 << 20, false}, {"1.5GiB", 3 << 29, false},
		{"64k", 64 << 10, false}, {"2G", 2 << 30, false}, {"1MB", 1e6, false}, {"10B", 10, false},
		{"", 0, true}, {"MiB", 0, true}, {"1.5.5M", 0, true}, {"-1", 0, true}, {"1e30GiB", 0, true}, {"NaN", 0, true},
	} {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.bad || (!tt.bad && got != tt.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
	for n, want := range map[int64]string{256 << 20: "256MiB", 3 << 29: "1536MiB", 1000: "1000", 1 << 40: "1TiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestNameRules(t *testing.T) {
	for _, tt := range []struct {
		rule nameRule
		name string
		ok   bool
	}{
		{agentRe, "code-reviewer.v2", true}, {agentRe, "-x", false}, {agentRe, "", false}, {agentRe, strings.Repeat("a", 129), false},
		{hostnameRe, "box-1", true}, {hostnameRe, "a", true}, {hostnameRe, "box-", false}, {hostnameRe, "a_b", false}, {hostnameRe, strings.Repeat("a", 64), false},
		{userRe, "agent", true}, {userRe, "_svc-1", true}, {userRe, "Agent", false}, {userRe, "1a", false},
		{envNameRe, "PATH", true}, {envNameRe, "_x1", true}, {envNameRe, "1X", false}, {envNameRe, "A-B", false}, {envNameRe, "A=B", false},
	} {
		if got := tt.rule.MatchString(tt.name); got != tt.ok {
			t.Errorf("%+v.MatchString(%q) = %v, want %v", tt.rule, tt.name, got, tt.ok)
		}
	}
}

func TestLimits(t *testing.T) {
	p := Default()
	for _, l := range Limits {
		q := p.Resources.Get(l.Name)
		if q == nil || !q.Set() {
			t.Errorf("%s: no default", l.Name)
			continue
		}
		if want, _ := parseQuantity(l, l.Default); q.N != want.N {
			t.Errorf("%s: default.yaml says %s, Limits says %s", l.Name, q, l.Default)
		}
	}
	for _, tt := range []struct {
		name, value, want string
		ok                bool
	}{
		{"wall", "1.5m", "90s", true}, {"wall", "30", "30s", true}, {"wall", "250ms", "250ms", true}, {"wall", "1ms", "", false},
		{"wall", "unlimited", "unlimited", true}, {"wall", "soon", "", false}, {"wall", "-1s", "", false},
		{"cpu_time", "2m", "2m", true}, {"cpu_time", "500ms", "", false},
		{"cpus", "1.5", "1.5", true}, {"cpus", "0.001", "", false}, {"cpus", "two", "", false},
		{"memory", "128MiB", "128MiB", true}, {"memory", "1MiB", "", false},
		{"pids", "64", "64", true}, {"pids", "6.5", "", false}, {"pids", "3", "", false},
		{"open_files", "unlimited", "", false}, {"tmp_size", "unlimited", "", false},
		{"output", "1MiB", "1MiB", true}, {"nosuch", "1", "", false},
	} {
		p := Default()
		err := p.SetLimit(tt.name, tt.value)
		if (err == nil) != tt.ok {
			t.Errorf("SetLimit(%s, %s): error %v, want ok=%v", tt.name, tt.value, err, tt.ok)
			continue
		}
		if tt.ok {
			if got := p.Resources.Get(tt.name).String(); got != tt.want {
				t.Errorf("SetLimit(%s, %s) = %s, want %s", tt.name, tt.value, got, tt.want)
			}
		}
	}
}
