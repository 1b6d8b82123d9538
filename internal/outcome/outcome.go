// Package outcome describes how a contained run ended: one structure with a
// status, the exit status cordon returns, the limit that ended the run, the
// resources used against every limit, and one human sentence. It is pure:
// the supervisor gathers the facts, Decide turns them into an Outcome.
//
// Decide ranks what it knows by who could have made it up, so that nothing
// the sandbox prints outranks what cordon saw for itself:
//
//  1. what cordon decided: a sandbox error, drift, a limit it ended the run
//     for (wall, output, memory and pids from the cgroup's counters, a
//     reviewed workspace's layer it measured full), an egress budget its
//     proxy enforced;
//  2. what the kernel counted: the signal of a limit that killed the
//     command or another process of the run, the cgroup's OOM kills;
//  3. what the command said: an exit status such as a shell gives for a
//     child killed by a limit's signal, then words on its standard error.
//
// A lower rank is read only when no higher one names a limit; within a
// rank, the order is the one Decide lists.
package outcome

import (
	"fmt"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// Status is how a run ended.
type Status string

// Statuses. Decide ranks the evidence for them as the package doc says.
const (
	SandboxError  Status = "sandbox_error"
	Drift         Status = "drift"
	Timeout       Status = "timeout"
	OutputLimit   Status = "output_limit"
	EgressBudget  Status = "egress_budget"
	EgressDenied  Status = "egress_denied"
	MemoryLimit   Status = "memory_limit"
	PidsLimit     Status = "pids_limit"
	CPUTimeLimit  Status = "cpu_time_limit"
	FileSizeLimit Status = "file_size_limit"
	// WorkspaceSizeLimit and WorkspaceInodesLimit: a reviewed workspace's
	// layer was filled.
	WorkspaceSizeLimit   Status = "workspace_size_limit"
	WorkspaceInodesLimit Status = "workspace_inodes_limit"
	// CacheSizeLimit: the agent's caches grew past cache_size.
	CacheSizeLimit Status = "cache_size_limit"
	Signaled       Status = "signaled"
	ExitNonzero    Status = "exit_nonzero"
	OK             Status = "ok"
)

// Exit statuses of cordon that are not the command's own.
const (
	ExitCacheSize       = 113
	ExitWorkspaceInodes = 114
	ExitWorkspaceSize   = 115
	ExitEgressDenied    = 116
	ExitDrift           = 117
	ExitEgressBudget    = 118
	ExitFileSizeLimit   = 119
	ExitCPUTimeLimit    = 120
	ExitMemoryLimit     = 121
	ExitPidsLimit       = 122
	ExitOutputLimit     = 123
	ExitTimeout         = 124 // like timeout(1)
	ExitSandboxError    = 125
	ExitCannotRun       = 126 // like a shell
	ExitNotFound        = 127 // like a shell
	exitSignalBase      = 128 // 128+N: killed by signal N, like a shell
)

// limitStatus maps the limits that end a run to their status and exit code.
var limitStatus = map[string]struct {
	status Status
	exit   int
}{
	"wall":      {Timeout, ExitTimeout},
	"timeout":   {Timeout, ExitTimeout},
	"output":    {OutputLimit, ExitOutputLimit},
	"memory":    {MemoryLimit, ExitMemoryLimit},
	"pids":      {PidsLimit, ExitPidsLimit},
	"cpu_time":  {CPUTimeLimit, ExitCPUTimeLimit},
	"file_size": {FileSizeLimit, ExitFileSizeLimit},

	"workspace_size":   {WorkspaceSizeLimit, ExitWorkspaceSize},
	"workspace_inodes": {WorkspaceInodesLimit, ExitWorkspaceInodes},
	"cache_size":       {CacheSizeLimit, ExitCacheSize},
}

// Outcome is the whole account of one run.
type Outcome struct {
	// Sandbox is the run's id in the audit log.
	Sandbox string `json:"sandbox,omitempty"`
	Status  Status `json:"status"`
	// ExitCode is the status cordon exits with.
	ExitCode int `json:"exit_code"`
	// CommandExitCode is the command's own exit status, when it exited.
	CommandExitCode *int `json:"command_exit_code,omitempty"`
	// Signal is the signal that ended the command, e.g. "SIGKILL".
	Signal string `json:"signal,omitempty"`
	// Limit is the limit that ended the run.
	Limit *Limit `json:"limit,omitempty"`
	Usage Usage  `json:"usage"`
	// Limits is every limit in force, how it was enforced and how much of
	// it the run used.
	Limits []LimitState `json:"limits"`
	// Egress lists every connection the sandbox tried through the proxy.
	Egress []egress.Event `json:"egress,omitempty"`
	// Degraded names containment layers the run went without, at the
	// user's request.
	Degraded []string `json:"degraded,omitempty"`
	// LandlockABI is the Landlock ABI that was in force, 0 if none.
	LandlockABI int `json:"landlock_abi,omitempty"`
	// Notes are remarks about the containment of this run.
	Notes []string `json:"notes,omitempty"`
	// Error says what failed, for sandbox_error.
	Error string `json:"error,omitempty"`
	// Drift names what changed in the running sandbox, for drift.
	Drift []string `json:"drift,omitempty"`
	// Changes, for a reviewed workspace, is the change set the run left
	// waiting for review.
	Changes *Changes `json:"changes,omitempty"`
	// Obeyed lists, for a workspace in direct mode, what the run made or
	// changed that the host's tools obey (git, hg, package managers,
	// editors, cordon) where direct mode cannot hold it back: below the
	// workspace's root, as a nested repository.
	Obeyed []Obeyed `json:"obeyed,omitempty"`
	// ObeyedUnchecked says, when the look for Obeyed could not finish
	// (the workspace past its bounds, a directory cordon could not list),
	// what was not looked at.
	ObeyedUnchecked string `json:"obeyed_unchecked,omitempty"`
	// Protected, for a command that exited non-zero, names the protected
	// paths (relative to their bind, as workspace.unprotect names them)
	// that its standard error named with a refusal such as "Read-only
	// file system": what cordon kept read-only may be why it failed.
	Protected []string `json:"protected,omitempty"`
	// Caches, when the run had its agent's caches (the profile's
	// caches:), says which and what they held when it ended.
	Caches *Caches `json:"caches,omitempty"`
	// Message is one sentence for a person.
	Message string `json:"message"`
}

// Caches is what a run's caches held when it ended, and what cordon
// cleared to keep them within cache_size.
type Caches struct {
	Names []string `json:"names"`
	// Bytes and Files are what the agent's caches held together when the
	// run ended, counted up to the limit (Past says they were past it).
	Bytes int64 `json:"bytes"`
	Files int64 `json:"files"`
	Past  bool  `json:"past,omitempty"`
	// Cleared names the caches cordon emptied after the run, least
	// recently used first, to bring them back within cache_size.
	Cleared []string `json:"cleared,omitempty"`
	// Error says what went wrong measuring or clearing them.
	Error string `json:"error,omitempty"`
}

// Obeyed is one file or directory a run made or changed that a host tool
// obeys.
type Obeyed struct {
	Path string `json:"path"`
	Tool string `json:"tool"`
	// Created says the run made it; Remove is then the command that
	// removes it.
	Created bool   `json:"created,omitempty"`
	Remove  string `json:"remove,omitempty"`
	// Unreadable says it is a directory cordon could not list: the run
	// took away the permission to, and what it holds was not looked at.
	Unreadable bool `json:"unreadable,omitempty"`
	// MovedTo is where cordon moved what the run made (a HEAD at the
	// workspace's root, which would make it a repository).
	MovedTo string `json:"moved_to,omitempty"`
}

// Line is o for a person, one line (the path is the sandbox's choice: the
// caller escapes what it prints).
func (o Obeyed) Line() string {
	if o.MovedTo != "" {
		return fmt.Sprintf("the run made %s, with which git would take the workspace's root itself as a repository and obey what the run wrote there: cordon moved it to %s", o.Path, o.MovedTo)
	}
	if o.Unreadable {
		return fmt.Sprintf("cordon could not look inside %s, which the run left unreadable: review it before a host tool (git, hg, a package manager, an editor) runs there", o.Path)
	}
	if o.Created {
		return fmt.Sprintf("the run made %s, which %s obeys: review it before %s runs there, or remove it: %s", o.Path, o.Tool, o.Tool, o.Remove)
	}
	return fmt.Sprintf("the run changed %s, which %s obeys: review it before %s runs there", o.Path, o.Tool, o.Tool)
}

// Changes summarises the change set a run in a reviewed workspace left:
// `cordon changes SET` lists it, `cordon apply SET` lands it.
type Changes struct {
	Set     string `json:"set"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
	Digest  string `json:"digest,omitempty"`
	// Landed, for a guarded workspace, counts the changes that landed on
	// the host when the run ended; Entries those that wait in Set, held
	// by the review policy, or left alone because the host changed the
	// same path during the run (Conflicts of them).
	Landed    int `json:"landed,omitempty"`
	Conflicts int `json:"conflicts,omitempty"`
	// Pending, for a guarded sandbox of cordon serve, says why what the
	// command wrote has not landed yet (a process of the sandbox still
	// runs).
	Pending string `json:"pending,omitempty"`
	// Error says why the changes could not be kept; the host's workspace
	// is untouched.
	Error string `json:"error,omitempty"`
}

// Limit names a limit and its value.
type Limit struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Evidence says how cordon knows, when the limit was reached by a
	// process other than the command and the command did not end of it,
	// or when cordon found it by a count of its own.
	Evidence string `json:"evidence,omitempty"`
}

// Usage is what the run consumed. Fields that could not be measured on this
// host are absent.
type Usage struct {
	WallMS          int64  `json:"wall_ms"`
	UserCPUMS       *int64 `json:"user_cpu_ms,omitempty"`
	SystemCPUMS     *int64 `json:"system_cpu_ms,omitempty"`
	PeakMemoryBytes *int64 `json:"peak_memory_bytes,omitempty"`
	PeakProcesses   *int64 `json:"peak_processes,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
}

// LimitState is one limit of the run.
type LimitState struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// EnforcedBy is "cgroup v2", "cgroup v1", "rlimit", "tmpfs",
	// "supervisor", or "unenforced".
	EnforcedBy string `json:"enforced_by"`
	// Used is the fraction of the limit the run used, when measured.
	Used *float64 `json:"used,omitempty"`
}

// Facts are what the supervisor observed.
type Facts struct {
	// Err is set when the sandbox could not be built or run.
	Err error
	// Exited and Code: the command exited by itself with Code.
	Exited bool
	Code   int
	// Signal is the signal that ended the command, 0 if none.
	Signal     int
	SignalName string
	// ExecFailed is set when the command could not be started; Code is then
	// 126 or 127.
	ExecFailed string
	// Killed names the limit for which cordon ended the run ("wall",
	// "timeout", "output", "memory", "pids", "cpu_time"), or "".
	Killed string
	// KilledBy says how cordon knows the limit in Killed was reached,
	// where its own count, not the kernel's report, found it ("" where
	// the limit says it all).
	KilledBy string
	// OOMKills counts processes the kernel killed for memory.
	OOMKills int64
	Wall     time.Duration
	Usage    Usage
	Limits   []LimitState
	Degraded []string
	Egress   []egress.Event
	// EgressUsedUp names the egress budget that was used up ("bytes_out",
	// "bytes_in", "connections", "max_denied"), or "".
	EgressUsedUp string
	EgressBudget string // its value
	// Drift names what changed in the running sandbox, when that stopped
	// it.
	Drift []string
	// OtherSignal is a limit's signal (SIGXCPU, SIGXFSZ) that killed a
	// process of the run other than the command, 0 if none was seen.
	OtherSignal int
	// OutputSaid lists, in order, the LimitPhrases a process of the run
	// wrote to its standard error (each once).
	OutputSaid []string
	// Protected lists, in order, the protected paths a line of the run's
	// standard error named together with a refusal ("Read-only file
	// system", "Device or resource busy", "Permission denied", "Operation
	// not permitted").
	Protected []string
}

// Signal numbers Decide recognizes (the same on every Linux architecture
// cordon supports).
const (
	sigKill = 9
	sigXCPU = 24
	sigXFSZ = 25
)

// Decide turns the facts of a run into its outcome.
func Decide(f Facts) Outcome {
	o := Outcome{Usage: f.Usage, Limits: f.Limits, Degraded: f.Degraded, Egress: f.Egress}
	if o.Limits == nil {
		o.Limits = []LimitState{}
	}
	o.Usage.WallMS = f.Wall.Milliseconds()
	if f.Exited {
		code := f.Code
		o.CommandExitCode = &code
	}
	if f.Signal != 0 {
		o.Signal = f.SignalName
	}
	limit, evidence := reached(f)
	switch {
	case f.Err != nil:
		o.Status, o.ExitCode, o.Error = SandboxError, ExitSandboxError, f.Err.Error()
		o.Message = "cordon could not run the command: " + f.Err.Error()
		return o
	case len(f.Drift) > 0:
		o.Status, o.ExitCode, o.Drift = Drift, ExitDrift, f.Drift
		o.Message = "stopped: the sandbox drifted from how it was built: " + strings.Join(f.Drift, "; ")
	case limit != "":
		ls := limitStatus[limit]
		o.Status, o.ExitCode = ls.status, ls.exit
		o.Limit = &Limit{Name: limit, Value: o.limitValue(limit), Evidence: evidence}
		o.Message = fmt.Sprintf("stopped: the %s limit (%s) was reached", strings.ReplaceAll(limit, "_", " "), o.Limit.Value)
		if evidence != "" {
			o.Message = fmt.Sprintf("the %s limit (%s) was reached: %s", strings.ReplaceAll(limit, "_", " "), o.Limit.Value, evidence)
			if f.Exited && !strings.HasPrefix(evidence, "the command exited") {
				o.Message += fmt.Sprintf("; the command exited with status %d", f.Code)
			}
		}
	case f.EgressUsedUp == "max_denied":
		o.Status, o.ExitCode = EgressDenied, ExitEgressDenied
		o.Limit = &Limit{Name: "egress_max_denied", Value: f.EgressBudget}
		o.Message = fmt.Sprintf("the sandbox made more refused connection attempts than its egress budget allows (max_denied %s); its connections were cut and further ones refused", f.EgressBudget)
	case f.EgressUsedUp != "":
		o.Status, o.ExitCode = EgressBudget, ExitEgressBudget
		o.Limit = &Limit{Name: "egress_" + f.EgressUsedUp, Value: f.EgressBudget}
		o.Message = fmt.Sprintf("the egress budget for %s (%s) was used up; the connection was cut and further ones refused", strings.ReplaceAll(f.EgressUsedUp, "_", " "), f.EgressBudget)
	case f.ExecFailed != "":
		o.Status, o.ExitCode = ExitNonzero, f.Code
		o.Message = "the command could not be started: " + f.ExecFailed
	case f.Signal != 0:
		o.Status, o.ExitCode = Signaled, exitSignalBase+f.Signal
		o.Message = fmt.Sprintf("the command was killed by %s", f.SignalName)
	case f.Code != 0:
		o.Status, o.ExitCode = ExitNonzero, f.Code
		o.Message = fmt.Sprintf("the command exited with status %d", f.Code)
		if len(f.Protected) > 0 {
			// The command's own words, so only a hint: never a status.
			o.Protected = f.Protected
			o.Message += "; " + protectedHint(f.Protected)
		}
	default:
		o.Status, o.ExitCode = OK, 0
		o.Message = "the command exited with status 0"
	}
	if near := o.nearest(); near != "" {
		o.Message += "; " + near
	}
	return o
}

// reached names the limit that ended the run, with how cordon knows when
// the command did not end of it, ranked as the package doc says: cordon's
// own decisions first (a limit it killed for, an egress budget its proxy
// enforced, which the caller reports), then the kernel's counts, then what
// the command said.
func reached(f Facts) (limit, evidence string) {
	if f.Killed != "" || f.EgressUsedUp != "" {
		return f.Killed, f.KilledBy
	}
	if limit, evidence = counted(f); limit != "" {
		return limit, evidence
	}
	return said(f)
}

// counted finds a limit in what the kernel counted: the signal that ended
// the command, the cgroup's OOM kills, a limit's signal that killed
// another process of the run.
func counted(f Facts) (limit, evidence string) {
	switch {
	case f.Signal == sigXCPU:
		return "cpu_time", ""
	case f.Signal == sigXFSZ:
		return "file_size", ""
	case f.OOMKills > 0 && (f.Signal == sigKill || !f.Exited):
		return "memory", ""
	case f.Signal == sigKill && usedUp(f.Limits, "cpu_time"):
		// RLIMIT_CPU's hard limit, one second past the soft one, kills
		// with SIGKILL a program that ignored SIGXCPU.
		return "cpu_time", ""
	case f.OOMKills > 0 && isSet(f.Limits, "memory"):
		return "memory", fmt.Sprintf("the kernel killed %d process(es) of the run for memory", f.OOMKills)
	case isSet(f.Limits, limitSignals[f.OtherSignal]):
		return limitSignals[f.OtherSignal], fmt.Sprintf("a process of the run was killed by %s", signalName(f.OtherSignal))
	}
	return "", ""
}

// protectedHint says that the protected paths rels, which a failing
// command named, are cordon's doing, and how a profile allows them.
func protectedHint(rels []string) string {
	what := "it"
	if len(rels) > 1 {
		what = "them"
	}
	return fmt.Sprintf("cordon protects %s, which the host's tools obey: the sandbox may not change %s (to allow it: --guarded, or workspace.mode: guarded, where the sandbox may change anything and what the host would obey waits for a person; or workspace.unprotect: [%s] in the profile)",
		joinNames(rels), what, strings.Join(rels, ", "))
}

// joinNames joins names as a sentence does: a, b and c.
func joinNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// limitSignals are the signals the kernel sends a process that reaches a
// per-process limit.
var limitSignals = map[int]string{sigXCPU: "cpu_time", sigXFSZ: "file_size"}

// said finds a limit in what the command said, which the sandbox can
// forge: the command may be a shell that went on, or exited with the
// status shells give a killed child, and a program that ignores SIGXFSZ
// gets EFBIG, which it reports in its own words. A limit that is not set
// is never reported.
func said(f Facts) (limit, evidence string) {
	if f.Exited && f.Code > 128 && isSet(f.Limits, limitSignals[f.Code-128]) {
		return limitSignals[f.Code-128], fmt.Sprintf("the command exited with status %d, as a shell does when a process it started is killed by %s", f.Code, signalName(f.Code-128))
	}
	for _, phrase := range f.OutputSaid {
		limit := LimitPhrases[phrase]
		if limit == "memory" && !privateMemory(f.Limits) {
			continue // with a cgroup, memory is reached by an OOM kill
		}
		if limit == "pids" && !perUserPids(f.Limits) {
			continue // with a cgroup, pids.events counts the refused forks
		}
		if isSet(f.Limits, limit) {
			return limit, fmt.Sprintf("a process of the run reported %q on its standard error", phrase)
		}
	}
	return "", ""
}

// isSet reports whether the named limit is in force.
func isSet(ls []LimitState, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return l.EnforcedBy != "unlimited"
		}
	}
	return false
}

// PrivateMemoryRlimit is how memory is enforced without a cgroup: each
// process's private memory by RLIMIT_DATA; shared mappings, memfd and
// tmpfs are not counted, nor the sandbox as a whole.
const PrivateMemoryRlimit = "rlimit, private memory per process"

// perUserPids reports whether the pids limit is RLIMIT_NPROC's, whose
// refusals the kernel counts nowhere cordon can read.
func perUserPids(ls []LimitState) bool {
	for _, l := range ls {
		if l.Name == "pids" {
			return l.EnforcedBy == "rlimit"
		}
	}
	return false
}

func privateMemory(ls []LimitState) bool {
	for _, l := range ls {
		if l.Name == "memory" {
			return l.EnforcedBy == PrivateMemoryRlimit
		}
	}
	return false
}

// LimitPhrases are what shells, C libraries and runtimes print on standard
// error when a process reaches a per-process limit (strsignal of its
// signal, strerror of EFBIG or ENOMEM, the runtimes' own words for a failed
// allocation), with the limit each one means. Memory counts only where an
// rlimit bounds it.
var LimitPhrases = map[string]string{
	"File size limit exceeded":      "file_size",
	"File too large":                "file_size",
	"CPU time limit exceeded":       "cpu_time",
	"Cannot allocate memory":        "memory",
	"MemoryError":                   "memory",
	"runtime: out of memory":        "memory",
	"fatal error: out of memory":    "memory",
	"JavaScript heap out of memory": "memory",
	// A fork the pids limit refused, in the words of dash, bash and Go.
	"Cannot fork":                                   "pids",
	"fork: Resource temporarily unavailable":        "pids",
	"fork: retry: Resource temporarily unavailable": "pids",
	"runtime: failed to create new OS thread":       "pids",
}

// EndsMessage are the phrases (the C library's strerror texts, which
// documentation and source comments also hold) that count only where they
// end a message: at the end of a line or before ":", as in "head: error
// writing 'f': File too large", not in "/* File too large */".
var EndsMessage = map[string]bool{"File too large": true, "Cannot allocate memory": true}

func signalName(sig int) string {
	switch sig {
	case sigXCPU:
		return "SIGXCPU"
	case sigXFSZ:
		return "SIGXFSZ"
	}
	return fmt.Sprintf("signal %d", sig)
}

// usedUp reports whether the run used all of the named limit.
func usedUp(ls []LimitState, name string) bool {
	for _, l := range ls {
		if l.Name == name && l.Used != nil && *l.Used >= 1 {
			return true
		}
	}
	return false
}

func (o *Outcome) limitValue(name string) string {
	for _, l := range o.Limits {
		if l.Name == name {
			return l.Value
		}
	}
	return "?"
}

// nearest describes the limit the run came closest to, when it used at
// least half of one that did not end it.
func (o *Outcome) nearest() string {
	var best *LimitState
	for i := range o.Limits {
		l := &o.Limits[i]
		if l.Used == nil || (o.Limit != nil && l.Name == o.Limit.Name) {
			continue
		}
		if best == nil || *l.Used > *best.Used {
			best = l
		}
	}
	if best == nil || *best.Used < 0.5 {
		return ""
	}
	return fmt.Sprintf("it used %.0f%% of the %s limit (%s)", 100**best.Used, strings.ReplaceAll(best.Name, "_", " "), best.Value)
}

// Clean reports whether the run ended by the command exiting with status 0.
func (o *Outcome) Clean() bool { return o.Status == OK }

// Summary is the one line printed on stderr when a run did not end cleanly.
func (o *Outcome) Summary() string { return "cordon: " + termsafe.Line(o.Message) }
