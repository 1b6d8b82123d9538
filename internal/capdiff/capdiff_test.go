package capdiff

import (
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

const base = `version: 1
agent: a
workspace:
  path: /srv/app
  writable: false
mounts:
  - path: /usr
  - path: /srv/cache
    target: /cache
    writable: true
env:
  pass: [LANG]
network:
  allow:
    - dest: pypi.org:443
    - dest: docs.example.com
      methods: [GET]
  budget:
    bytes_out: 1MiB
resources:
  memory: 1GiB
  wall: 5m
governance:
  owner: team
  scope: reads the app
  require_approval: true
  ceilings:
    paths: [/usr, /srv]
    limits:
      memory: 2GiB
`

func load(t *testing.T, text string) *profile.Profile {
	t.Helper()
	p, err := profile.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNoChange(t *testing.T) {
	if cs := Diff(load(t, base), load(t, base)); len(cs) != 0 {
		t.Fatalf("got %+v", cs)
	}
}

func TestChanges(t *testing.T) {
	tests := []struct {
		name string
		from string
		to   string
		kind Kind
		area string
		msg  string
	}{
		{"destination added", "    - dest: pypi.org:443\n", "    - dest: pypi.org:443\n    - dest: evil.example:443\n", Expansion, "network", "evil.example:443 is allowed"},
		{"destination removed", "    - dest: pypi.org:443\n", "", Reduction, "network", "pypi.org:443 is no longer allowed"},
		{"methods lifted", "      methods: [GET]\n", "", Expansion, "network", "docs.example.com is allowed (was (GET only))"},
		{"deny added", "  budget:\n", "  deny:\n    - dest: 10.0.0.0/8\n  budget:\n", Reduction, "network", "10.0.0.0/8 is denied"},
		{"transparent", "  budget:\n", "  transparent: true\n  budget:\n", Expansion, "network", "transparent"},
		{"budget lifted", "    bytes_out: 1MiB\n", "    bytes_out: unlimited\n", Expansion, "budget", "bytes_out budget is unlimited (was 1MiB)"},
		{"path added", "  - path: /usr\n", "  - path: /usr\n  - path: /opt\n", Expansion, "paths", "binds /opt"},
		{"path removed", "  - path: /usr\n", "", Reduction, "paths", "no longer binds /usr"},
		{"toolchain added", "env:\n", "toolchains: [python3]\nenv:\n", Expansion, "paths", "the host's python3 toolchain is bound read-only"},
		{"auto added", "env:\n", "toolchains: auto\nenv:\n", Expansion, "paths", "the toolchain of the command each run starts (auto) is bound"},
		{"bind made writable", "  - path: /usr\n", "  - path: /usr\n    writable: true\n", Expansion, "paths", "/usr is read-write (was read-only)"},
		{"bind made read-only", "    target: /cache\n    writable: true\n", "    target: /cache\n", Reduction, "paths", "/cache is read-only (was read-write)"},
		{"workspace writable", "  writable: false\n", "  writable: true\n", Expansion, "workspace", "read-write (was read-only)"},
		{"workspace moved", "  path: /srv/app\n", "  path: /home\n", Expansion, "workspace", "the workspace is /home (was /srv/app)"},
		{"env passed", "  pass: [LANG]\n", "  pass: [LANG, AWS_SECRET_ACCESS_KEY]\n", Expansion, "env", "AWS_SECRET_ACCESS_KEY is passed in"},
		{"limit raised", "  memory: 1GiB\n", "  memory: 4GiB\n", Expansion, "limits", "memory limit is 4GiB (was 1GiB)"},
		{"limit lifted", "  wall: 5m\n", "  wall: unlimited\n", Expansion, "limits", "wall limit is unlimited (was 5m)"},
		{"limit lowered", "  memory: 1GiB\n", "  memory: 512MiB\n", Reduction, "limits", "memory limit is 512MiB (was 1GiB)"},
		{"degraded", "version: 1\n", "version: 1\nallow_degraded: [cgroup]\n", Expansion, "degraded", "may run without cgroup"},
		{"ceiling widened", "    paths: [/usr, /srv]\n", "    paths: [/usr, /srv, /]\n", Expansion, "governance", "the ceiling admits /"},
		{"ceiling limit lifted", "    limits:\n      memory: 2GiB\n", "", Expansion, "governance", "memory ceiling is unlimited (was 2GiB)"},
		{"approval dropped", "  require_approval: true\n", "", Expansion, "governance", "no longer need approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.from) {
				t.Fatalf("base lacks %q", tt.from)
			}
			cs := Diff(load(t, base), load(t, strings.Replace(base, tt.from, tt.to, 1)))
			if len(cs) != 1 {
				t.Fatalf("want one change, got %+v", cs)
			}
			c := cs[0]
			if c.Kind != tt.kind || c.Area != tt.area || !strings.Contains(c.Message, tt.msg) {
				t.Errorf("got %+v; want %s %s %q", c, tt.kind, tt.area, tt.msg)
			}
			if Expanded(cs) != (tt.kind == Expansion) || len(Expansions(cs)) != len(cs)*btoi(tt.kind == Expansion) {
				t.Error("Expanded/Expansions disagree with the change")
			}
		})
	}
}

func TestToolchainRemoved(t *testing.T) {
	with := strings.Replace(base, "env:\n", "toolchains: [go, python3]\nenv:\n", 1)
	cs := Diff(load(t, with), load(t, strings.Replace(with, "[go, python3]", "[python3]", 1)))
	if len(cs) != 1 || cs[0].Kind != Reduction || cs[0].Field != "toolchains" || cs[0].Old != "go" || !strings.Contains(cs[0].Message, "go toolchain is no longer bound") {
		t.Errorf("got %+v", cs)
	}
}

// A cache kept between runs is writable state the next run reads: one
// more is an expansion, auto names every cache, one fewer a reduction.
func TestCaches(t *testing.T) {
	with := strings.Replace(base, "env:\n", "caches: [go]\nenv:\n", 1)
	cs := Diff(load(t, with), load(t, strings.Replace(with, "[go]", "auto", 1)))
	if len(cs) != 5 || cs[0].Kind != Expansion || cs[0].Field != "caches" || cs[0].New != "npm" {
		t.Errorf("[go] to auto: got %+v", cs)
	}
	cs = Diff(load(t, with), load(t, base))
	if len(cs) != 1 || cs[0].Kind != Reduction || cs[0].Old != "go" {
		t.Errorf("[go] to none: got %+v", cs)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Tools that become callable or graver, labels a sink now accepts or that
// no longer mark a result, and lifted caps are expansions: a profile that
// needs approval does not run with them unapproved.
func TestToolChanges(t *testing.T) {
	old := `version: 1
agent: a
tools:
  read_file:
    class: read
    returns: [untrusted]
    labels:
      - {arg: path, suffix: .env, labels: [secret]}
  fetch:
    class: external
    accepts: [untrusted]
    calls: 10
  shell:
    deny: true
session:
  calls: 100
`
	grown := `version: 1
agent: a
tools:
  read_file:
    class: write
  fetch:
    class: external
    accepts: [untrusted, secret]
  shell:
    class: irreversible
  send_email:
    class: external
session:
  calls: 200
`
	cs := Diff(load(t, old), load(t, grown))
	var got []string
	for _, c := range cs {
		got = append(got, string(c.Kind)+" "+c.Field+": "+c.Message)
	}
	for _, want := range []string{
		"expansion tools.read_file.class: the tool read_file is write (was read)",
		"expansion tools.read_file.returns: no longer: what read_file returns is labelled untrusted",
		`expansion tools.read_file.labels: no longer: read_file labels by path ""..".env" as secret`,
		"expansion tools.fetch.accepts: fetch accepts the label secret",
		"expansion tools.fetch.calls: the fetch calls per session are unbounded (was 10)",
		"expansion tools.send_email: the tool send_email may be called (external)",
		"expansion tools.shell: the tool shell may be called (irreversible)",
		"expansion session.calls: the calls per session are 200 (was 100)",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
		}
	}
	if back := Diff(load(t, grown), load(t, old)); Expanded(back) {
		t.Errorf("the way back expands: %+v", Expansions(back))
	}
}

func TestGatewayChanges(t *testing.T) {
	old := `version: 1
agent: a
servers:
  fs:
    command: [mcp-fs, /data]
    profile: fs.yaml
tools:
  fs__write:
    class: write
    constraints: ['args.path.startsWith("notes/")']
    pin: sha256:1111111111111111111111111111111111111111111111111111111111111111
`
	grown := `version: 1
agent: a
servers:
  fs:
    command: [mcp-fs, /]
    profile: fs.yaml
  bank:
    url: https://bank.example/mcp
tools:
  fs__write:
    class: write
    pin: sha256:2222222222222222222222222222222222222222222222222222222222222222
`
	var got []string
	for _, c := range Diff(load(t, old), load(t, grown)) {
		got = append(got, string(c.Kind)+" "+c.Field+": "+c.Message)
	}
	for _, want := range []string{
		`expansion tools.fs__write.constraints: no longer: fs__write is constrained by args.path.startsWith("notes/")`,
		"expansion tools.fs__write.pin: the tool fs__write is approved with a new description",
		"expansion servers.bank: the tool server bank is fronted",
		"expansion servers.fs: the tool server fs runs differently",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
		}
	}
}

func TestApprovalChanges(t *testing.T) {
	old := `version: 1
agent: a
tools:
  pay:
    class: financial
  wipe:
    class: irreversible
approval:
  approvers: [alice]
`
	loose := `version: 1
agent: a
tools:
  pay:
    class: financial
  wipe:
    class: irreversible
approval:
  classes: [financial]
  tools:
    pay:
      required: false
  flows: true
  via: elicitation
  approvers: [alice, mallory]
`
	var got []string
	for _, c := range Diff(load(t, old), load(t, loose)) {
		got = append(got, string(c.Kind)+" "+c.Field+": "+c.Message)
	}
	for _, want := range []string{
		"expansion approval.tools.pay.required: calls of pay no longer wait for a person's approval",
		"expansion approval.classes: calls of wipe no longer wait for a person's approval",
		"expansion approval.flows: calls a flow rule refused may run once a person approves them",
		"expansion approval.via: the agent's client's user may approve calls (elicitation)",
		"expansion approval.approvers: mallory may approve calls",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
		}
	}
	if back := Diff(load(t, loose), load(t, old)); Expanded(back) {
		t.Errorf("the way back expands: %+v", Expansions(back))
	}
}
