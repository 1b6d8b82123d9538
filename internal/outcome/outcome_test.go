package outcome

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func used(f float64) *float64 { return &f }

func TestDecide(t *testing.T) {
	limits := []LimitState{
		{Name: "wall", Value: "1s", EnforcedBy: "supervisor", Used: used(0.2)},
		{Name: "memory", Value: "128MiB", EnforcedBy: "cgroup v1", Used: used(0.9)},
		{Name: "pids", Value: "64", EnforcedBy: "cgroup v1"},
		{Name: "cpu_time", Value: "1s", EnforcedBy: "rlimit"},
		{Name: "file_size", Value: "1MiB", EnforcedBy: "rlimit"},
		{Name: "output", Value: "1KiB", EnforcedBy: "supervisor"},
		{Name: "timeout", Value: "500ms", EnforcedBy: "supervisor"},
	}
	tests := []struct {
		name   string
		facts  Facts
		status Status
		exit   int
		limit  string
		msg    string
	}{
		{"clean", Facts{Exited: true}, OK, 0, "", "exited with status 0; it used 90% of the memory limit (128MiB)"},
		{"nonzero", Facts{Exited: true, Code: 3}, ExitNonzero, 3, "", "exited with status 3"},
		{"signal", Facts{Signal: 11, SignalName: "SIGSEGV"}, Signaled, 139, "", "killed by SIGSEGV"},
		{"wall", Facts{Signal: 9, SignalName: "SIGKILL", Killed: "wall"}, Timeout, 124, "wall", "wall limit (1s) was reached"},
		{"output", Facts{Signal: 9, Killed: "output"}, OutputLimit, 123, "output", "output limit (1KiB)"},
		{"pids", Facts{Signal: 9, Killed: "pids"}, PidsLimit, 122, "pids", "pids limit (64)"},
		{"oom killed the command", Facts{Signal: 9, SignalName: "SIGKILL", OOMKills: 1}, MemoryLimit, 121, "memory", "memory limit (128MiB)"},
		{"oom killed a child only", Facts{Exited: true, Code: 1, OOMKills: 1}, MemoryLimit, 121, "memory", "memory limit (128MiB) was reached: the kernel killed 1 process(es) of the run for memory; the command exited with status 1"},
		{"a shell's child killed by SIGXFSZ", Facts{Exited: true, Code: 153}, FileSizeLimit, 119, "file_size", "exited with status 153, as a shell does when a process it started is killed by SIGXFSZ"},
		{"a shell's child killed by SIGXCPU", Facts{Exited: true, Code: 152}, CPUTimeLimit, 120, "cpu_time", "killed by SIGXCPU"},
		{"an orphan killed by SIGXFSZ", Facts{Exited: true, OtherSignal: 25}, FileSizeLimit, 119, "file_size", "a process of the run was killed by SIGXFSZ; the command exited with status 0"},
		{"a harmless phrase first", Facts{Exited: true, OutputSaid: []string{"Cannot allocate memory", "File size limit exceeded"}}, FileSizeLimit, 119, "file_size", `reported "File size limit exceeded"`},
		{"EFBIG in the output", Facts{Exited: true, Code: 1, OutputSaid: []string{"File too large"}}, FileSizeLimit, 119, "file_size", `reported "File too large" on its standard error`},
		{"cpu rlimit", Facts{Signal: 24, SignalName: "SIGXCPU"}, CPUTimeLimit, 120, "cpu_time", "cpu time limit (1s)"},
		{"file size rlimit", Facts{Signal: 25, SignalName: "SIGXFSZ"}, FileSizeLimit, 119, "file_size", "file size limit (1MiB)"},
		{"not found", Facts{Exited: true, Code: 127, ExecFailed: "x: command not found"}, ExitNonzero, 127, "", "could not be started"},
		{"sandbox error", Facts{Err: errors.New("landlock: missing")}, SandboxError, 125, "", "could not run the command: landlock: missing"},
		{"egress bytes", Facts{Exited: true, Code: 22, EgressUsedUp: "bytes_out", EgressBudget: "1MiB"}, EgressBudget, 118, "egress_bytes_out", "egress budget for bytes out (1MiB) was used up"},
		{"egress denials", Facts{Exited: true, EgressUsedUp: "max_denied", EgressBudget: "100"}, EgressDenied, 116, "egress_max_denied", "more refused connection attempts than its egress budget allows (max_denied 100)"},
		{"a command's own timeout", Facts{Signal: 9, SignalName: "SIGKILL", Killed: "timeout"}, Timeout, 124, "timeout", "timeout limit (500ms) was reached"},
		{"a limit before egress denials", Facts{Signal: 9, Killed: "wall", EgressUsedUp: "max_denied", EgressBudget: "100"}, Timeout, 124, "wall", "wall limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.facts.Limits = limits
			tt.facts.Wall = 1500 * time.Millisecond
			o := Decide(tt.facts)
			if o.Status != tt.status || o.ExitCode != tt.exit {
				t.Errorf("got %s/%d, want %s/%d", o.Status, o.ExitCode, tt.status, tt.exit)
			}
			if (o.Limit == nil) != (tt.limit == "") || (o.Limit != nil && o.Limit.Name != tt.limit) {
				t.Errorf("limit: got %+v, want %q", o.Limit, tt.limit)
			}
			if !strings.Contains(o.Message, tt.msg) {
				t.Errorf("message %q does not say %q", o.Message, tt.msg)
			}
			if o.Usage.WallMS != 1500 {
				t.Errorf("wall: got %d", o.Usage.WallMS)
			}
			if _, err := json.Marshal(o); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A protected path a failing command named is a hint in the message and
// the outcome's protected, never its status or exit status; a command
// that succeeded, was killed or reached a limit gets none.
func TestProtectedHint(t *testing.T) {
	named := []string{".git", ".vscode"}
	for _, tt := range []struct {
		name   string
		facts  Facts
		status Status
		exit   int
		hint   bool
	}{
		{"exited non-zero", Facts{Exited: true, Code: 128, Protected: named}, ExitNonzero, 128, true},
		{"exited 0", Facts{Exited: true, Protected: named}, OK, 0, false},
		{"killed", Facts{Signal: 15, SignalName: "SIGTERM", Protected: named}, Signaled, 143, false},
		{"a limit", Facts{Exited: true, Code: 1, Killed: "wall", Protected: named}, Timeout, ExitTimeout, false},
		{"not started", Facts{Exited: true, Code: 126, ExecFailed: "permission denied", Protected: named}, ExitNonzero, 126, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Decide(tt.facts)
			if o.Status != tt.status || o.ExitCode != tt.exit {
				t.Errorf("got %s/%d, want %s/%d", o.Status, o.ExitCode, tt.status, tt.exit)
			}
			said := strings.Contains(o.Message, "cordon protects .git and .vscode, which the host's tools obey: the sandbox may not change them (to allow it: --guarded")
			if said != tt.hint || (o.Protected != nil) != tt.hint {
				t.Errorf("message %q, protected %q; want a hint: %t", o.Message, o.Protected, tt.hint)
			}
		})
	}
	o := Decide(Facts{Exited: true, Code: 1, Protected: []string{".git/config"}})
	if want := "the command exited with status 1; cordon protects .git/config, which the host's tools obey: the sandbox may not change it (to allow it: --guarded, or workspace.mode: guarded, where the sandbox may change anything and what the host would obey waits for a person; or workspace.unprotect: [.git/config] in the profile)"; o.Message != want {
		t.Errorf("message %q, want %q", o.Message, want)
	}
}

// Words of a failed allocation mean the memory limit only where an rlimit
// bounds each process; with a cgroup, only its OOM kills count.
func TestMemoryWords(t *testing.T) {
	for by, want := range map[string]Status{PrivateMemoryRlimit: MemoryLimit, "cgroup v2": ExitNonzero} {
		f := Facts{Exited: true, Code: 1, OutputSaid: []string{"MemoryError"},
			Limits: []LimitState{{Name: "memory", Value: "100MiB", EnforcedBy: by}}}
		if o := Decide(f); o.Status != want {
			t.Errorf("memory enforced by %s: got %s (%s), want %s", by, o.Status, o.Message, want)
		}
	}
}

// Words of a refused fork mean the pids limit only where RLIMIT_NPROC
// bounds the sandbox; with a cgroup, only its count of refusals does.
func TestForkWords(t *testing.T) {
	for by, want := range map[string]Status{"rlimit": PidsLimit, "cgroup v1": ExitNonzero} {
		f := Facts{Exited: true, Code: 2, OutputSaid: []string{"Cannot fork"},
			Limits: []LimitState{{Name: "pids", Value: "32", EnforcedBy: by}}}
		if o := Decide(f); o.Status != want {
			t.Errorf("pids enforced by %s: got %s (%s), want %s", by, o.Status, o.Message, want)
		}
	}
}

// A limit cordon found by a count of its own says what it counted.
func TestKilledWithEvidence(t *testing.T) {
	f := Facts{Signal: 9, SignalName: "SIGKILL", Killed: "pids", KilledBy: "cordon counted 32 tasks",
		Limits: []LimitState{{Name: "pids", Value: "32", EnforcedBy: "rlimit"}}}
	o := Decide(f)
	if o.Status != PidsLimit || o.ExitCode != ExitPidsLimit || o.Limit == nil || o.Limit.Evidence != "cordon counted 32 tasks" {
		t.Fatalf("got %s/%d, limit %+v", o.Status, o.ExitCode, o.Limit)
	}
	if want := "the pids limit (32) was reached: cordon counted 32 tasks"; o.Message != want {
		t.Errorf("message %q, want %q", o.Message, want)
	}
	f.KilledBy = ""
	if o := Decide(f); o.Message != "stopped: the pids limit (32) was reached" || o.Limit.Evidence != "" {
		t.Errorf("without evidence: message %q, limit %+v", o.Message, o.Limit)
	}
}

// A limit that is not set is never what a run reached, whatever its
// processes said or how they ended.
func TestUnsetLimitNotReached(t *testing.T) {
	f := Facts{Exited: true, Code: 153, OtherSignal: 25, OutputSaid: []string{"File too large"}, OOMKills: 2,
		Limits: []LimitState{{Name: "file_size", Value: "unlimited", EnforcedBy: "unlimited"}}}
	if o := Decide(f); o.Status != ExitNonzero || o.ExitCode != 153 || o.Limit != nil {
		t.Errorf("got %s/%d, limit %+v", o.Status, o.ExitCode, o.Limit)
	}
}

func TestExitCodesAreDistinct(t *testing.T) {
	// Limits of one status (wall and a command's own timeout: timeout)
	// share its exit code; statuses never do.
	seen := map[int]string{}
	status := map[int]Status{}
	for name, ls := range limitStatus {
		if prev, dup := seen[ls.exit]; dup && status[ls.exit] != ls.status {
			t.Errorf("%s and %s share exit code %d", name, prev, ls.exit)
		}
		seen[ls.exit], status[ls.exit] = name, ls.status
	}
	for name, c := range map[string]int{"drift": ExitDrift, "egress_budget": ExitEgressBudget, "egress_denied": ExitEgressDenied} {
		if prev, dup := seen[c]; dup {
			t.Errorf("%s and %s share exit code %d", name, prev, c)
		}
		seen[c] = name
	}
	for _, c := range []int{ExitSandboxError, ExitCannotRun, ExitNotFound} {
		if name, dup := seen[c]; dup {
			t.Errorf("%s uses reserved exit code %d", name, c)
		}
	}
}

// A program that ignores SIGXCPU is killed with SIGKILL at RLIMIT_CPU's hard
// limit: that is the cpu_time limit too, and only when the CPU time is used.
func TestSIGKILLAtTheCPUTimeLimit(t *testing.T) {
	for _, tt := range []struct {
		used float64
		want Status
	}{{2.01, CPUTimeLimit}, {1, CPUTimeLimit}, {0.5, Signaled}} {
		o := Decide(Facts{Signal: 9, SignalName: "SIGKILL", Limits: []LimitState{{Name: "cpu_time", Value: "1s", EnforcedBy: "rlimit", Used: used(tt.used)}}})
		if o.Status != tt.want {
			t.Errorf("used %.2f: got %s, want %s", tt.used, o.Status, tt.want)
		}
	}
}

// The outcomes of egress budgets, and the egress events of every decision,
// follow docs/outcome.schema.json.
func TestEgressOutcomesFollowTheSchema(t *testing.T) {
	schema, err := jsonschema.NewCompiler().Compile("../../docs/outcome.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	events := []egress.Event{
		{Protocol: "connect", Host: "api.example.com", Port: 443, Decision: egress.Allow, Reason: "allowed"},
		{Protocol: "socks5", Host: "gone.example.com", Port: 443, Decision: egress.Unresolved, Reason: "the lookup of the name failed"},
		{Protocol: "proxy", Decision: egress.Deny, Reason: "refused: too many at once"},
	}
	for _, f := range []Facts{
		{Exited: true, EgressUsedUp: "max_denied", EgressBudget: "100", Egress: events},
		{Exited: true, EgressUsedUp: "connections", EgressBudget: "20", Egress: events},
	} {
		o := Decide(f)
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	// The schema ties each egress status to its exit code.
	o := Decide(Facts{Exited: true, EgressUsedUp: "max_denied", EgressBudget: "100"})
	o.ExitCode = ExitEgressBudget
	b, _ := json.Marshal(o)
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if schema.Validate(inst) == nil {
		t.Errorf("egress_denied with exit %d passed the schema", ExitEgressBudget)
	}
}

// What cordon decided outranks what the kernel counted, which outranks what
// the command said: words a sandbox prints never hide why cordon ended it.
func TestRanking(t *testing.T) {
	limits := []LimitState{
		{Name: "wall", Value: "10s", EnforcedBy: "supervisor"},
		{Name: "memory", Value: "128MiB", EnforcedBy: "cgroup v2"},
		{Name: "cpu_time", Value: "1s", EnforcedBy: "rlimit"},
		{Name: "file_size", Value: "1MiB", EnforcedBy: "rlimit"},
	}
	words := []string{"File too large"}
	for _, tt := range []struct {
		name  string
		facts Facts
		want  Status
	}{
		{"egress denial over words", Facts{Signal: 9, SignalName: "SIGKILL", OutputSaid: words, EgressUsedUp: "max_denied", EgressBudget: "100"}, EgressDenied},
		{"egress denial over a shell's status", Facts{Exited: true, Code: 153, OutputSaid: words, EgressUsedUp: "max_denied", EgressBudget: "100"}, EgressDenied},
		{"egress denial over the kernel", Facts{Exited: true, Code: 1, OtherSignal: 25, OOMKills: 1, EgressUsedUp: "max_denied", EgressBudget: "100"}, EgressDenied},
		{"egress budget over words", Facts{Exited: true, Code: 1, OutputSaid: words, EgressUsedUp: "bytes_out", EgressBudget: "1MiB"}, EgressBudget},
		{"a kill over the kernel and words", Facts{Signal: 9, Killed: "wall", OtherSignal: 24, OutputSaid: words}, Timeout},
		{"the kernel over words", Facts{Exited: true, Code: 1, OtherSignal: 24, OutputSaid: words}, CPUTimeLimit},
		{"OOM kills over a shell's status", Facts{Exited: true, Code: 153, OOMKills: 1}, MemoryLimit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.facts
			f.Limits = limits
			if o := Decide(f); o.Status != tt.want {
				t.Errorf("got %s (%s), want %s", o.Status, o.Message, tt.want)
			}
		})
	}
}
