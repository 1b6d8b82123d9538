// Package toolpolicy decides the tool calls of one agent session against
// its profile: which tools exist for the agent, how often each may be
// called, how long and how many steps the session may take, when the same
// failing call has become a loop, and which labelled data may flow into
// which tool. A read tool and a network tool that are harmless alone make
// exfiltration possible together: every result the agent is shown brings
// its labels into the session, and a sink refuses a label it does not
// accept, naming the earlier call that brought it in.
//
// Decisions are deterministic and pure: the same profile and the same
// sequence of calls and results give the same decisions, whether the calls
// come from a live agent or from a recorded trace (cordon replay).
package toolpolicy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/cel"
	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Call is one tool call as the policy decides it: its arguments decoded
// once, strictly, with each path argument replaced by the file it resolves
// to in the sandbox's view (Files, by argument), and the workspace that
// relative names in constraints and label rules are taken from. A recorded
// call holds all of it, so that a replay decides the same.
type Call struct {
	Tool      string          `json:"tool"`
	Args      map[string]any  `json:"args,omitempty"`
	Workspace string          `json:"workspace,omitempty"`
	Files     map[string]File `json:"files,omitempty"`
}

// File is a path argument resolved: its canonical path, and the identity
// of the file it names (an existing one's, or a new file's parent's).
type File struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Dir    bool   `json:"dir,omitempty"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Links  uint64 `json:"links,omitempty"`
	// Stamp and Unsettled are what the directories on Path said when it
	// was resolved (tools.File): the gateway compares them after a tool
	// server acted on the path. Not part of what is decided or recorded.
	Stamp     string `json:"-"`
	Above     string `json:"-"`
	Unsettled bool   `json:"-"`
}

// Same reports whether g is the file f: the same path, existence and
// identity.
func (f File) Same(g File) bool {
	return f.Path == g.Path && f.Exists == g.Exists && f.Dir == g.Dir && f.Dev == g.Dev && f.Ino == g.Ino
}

// Decision says whether a call may run, by which rule, and why.
type Decision struct {
	Allow bool `json:"allow"`
	// Rule is the profile field that decided: "tools.fetch.accepts",
	// "session.calls"; "tools" for a tool the profile does not list.
	Rule string `json:"rule"`
	// Reason says why, in a sentence the agent can act on.
	Reason string `json:"reason"`
	// Hint says what would be allowed instead, when something would.
	Hint string `json:"hint,omitempty"`
	// Limit names what was used up: a budget ("session.calls",
	// "session.steps", "session.wall", "tools.NAME.calls") or
	// "loop_detected".
	Limit string `json:"limit,omitempty"`
	// Because is the earlier call (1-based step) that brought in the label
	// a flow rule refused.
	Because int `json:"because,omitempty"`
	// Approval says the call is held until a person approves it (Allow is
	// false until then); Rule names what asked for it.
	Approval bool `json:"approval,omitempty"`
}

// Entry is a decided call in the session's history.
type Entry struct {
	Step  int    `json:"step"`
	Call  string `json:"call"`
	Allow bool   `json:"allow"`
	Held  bool   `json:"held,omitempty"`
	Rule  string `json:"rule"`
}

// historyLen is how many recent calls the session keeps for context.
const historyLen = 20

// origin is the first call whose result brought a label in.
type origin struct {
	step int
	call string
}

// Session is the state of one agent task. It is not safe for concurrent
// use.
type Session struct {
	p     *profile.Profile
	now   func() time.Time
	start time.Time

	steps   int
	calls   int
	perTool map[string]int
	labels  labelSet
	tools   map[string]*toolInfo

	// disabled are tools withdrawn from the agent, with the rule and why.
	disabled map[string]Withdrawn
	// granted are calls approved for the rest of the session.
	granted map[string]bool
	history window[entry]

	counters    counters
	checkpoints []Checkpoint
	lastAt      time.Time // the last checkpoint (the start before one)
	// tripped is the stop or approve rule that held, if any.
	tripped *Checkpoint

	// The last failed call, and how many times in a row it failed.
	lastFailed string
	fails      int

	// files are the labels of files written while a session carried
	// them; shared by the sessions of one gateway.
	files *FileLabels

	// scratch holds the labels of the call being recorded.
	scratch []string
}

// NewSession starts a session for the profile; now is the clock (nil for
// the wall clock).
func NewSession(p *profile.Profile, now func() time.Time) *Session {
	if now == nil {
		now = time.Now
	}
	return &Session{p: p, now: now, start: now(), perTool: map[string]int{}}
}

// Withdrawn is a tool taken from the agent: its calls are refused by Rule,
// for Reason (an upstream tool whose description is not the approved one).
type Withdrawn struct {
	Rule, Reason string
}

// Withdraw sets the tools withdrawn from the session; the session reads
// the map and never changes it, so one map may serve many sessions.
func (s *Session) Withdraw(tools map[string]Withdrawn) { s.disabled = tools }

// Steps is the number of calls decided so far.
func (s *Session) Steps() int { return s.steps }

// Labels are the labels the session carries, sorted.
func (s *Session) Labels() []string {
	return s.labels.names()
}

// Decide decides a call and counts it as a step; an allowed call is also
// counted against the call budgets. Its result is recorded with Record.
func (s *Session) Decide(c Call) Decision {
	var d Decision
	if s.tripped != nil && s.tripped.Action == "stop" {
		s.steps++
		d = s.afterTrip(d)
	} else {
		d = s.afterTrip(s.decide(c))
	}
	s.noted(c, d)
	return d
}

// noted counts the call of the step just taken as d decided it, runs the
// checkpoint of steps when due, and keeps it in the history.
func (s *Session) noted(c Call, d Decision) {
	s.count(c, d)
	s.checkpoint()
	s.history.push(entry{Entry{Step: s.steps, Allow: d.Allow, Held: d.Approval, Rule: d.Rule}, c}, historyLen)
}

// entry is a history entry with its call, described when asked for.
type entry struct {
	Entry
	call Call
}

// History is the session's recent calls, oldest first.
func (s *Session) History() []Entry {
	h := s.history.last(historyLen)
	out := make([]Entry, len(h))
	for i, e := range h {
		out[i] = e.Entry
		out[i].Call = describe(e.call)
	}
	return out
}

// Commit counts a call that was held and then approved against the call
// budgets, as an allowed call is when it is decided.
func (s *Session) Commit(c Call) {
	s.calls++
	s.perTool[c.Tool]++
}

// Grant approves calls identical to c for the rest of the session.
func (s *Session) Grant(c Call) {
	if s.granted == nil {
		s.granted = map[string]bool{}
	}
	s.granted[key(c)] = true
}

func (s *Session) decide(c Call) Decision {
	s.steps++
	// Budgets before the arguments: a call the session can no longer
	// make is refused as such, whatever it says (see Refuses).
	d, ti, refused := s.spent(c.Tool, s.steps-1)
	if refused {
		return d
	}
	b := s.p.Session
	if b == nil {
		b = &noBudgets
	}
	t := s.p.Tools[c.Tool]
	field := ti.field
	if b.Repeats > 0 && s.fails >= b.Repeats && s.lastFailed == key(c) {
		return deny("session.repeats", "loop_detected", fmt.Sprintf("the same %s call failed %d times in a row", c.Tool, s.fails), "change the call, or stop")
	}
	if len(t.Checks()) > 0 {
		args := nativeArgs(c.Args)
		for i, prog := range t.Checks() {
			err := prog.CheckIn(args, c.Workspace)
			if err == nil {
				continue
			}
			why := "is false"
			if !cel.IsFalse(err) {
				why = "cannot be evaluated: " + err.Error()
			}
			return deny(fmt.Sprintf("%s.constraints[%d]", field, i), "", fmt.Sprintf("the arguments break a constraint of %s: %s %s", c.Tool, prog, why),
				fmt.Sprintf("%s allows calls where %s", c.Tool, conjunction(t.Constraints)))
		}
	}
	ap := s.p.ApprovalPolicy()
	granted := len(s.granted) > 0 && s.granted[key(c)]
	if profile.Outward(t.Class) || len(t.Accepts) > 0 {
		for _, cl := range s.labels {
			l, o := cl.name, cl.origin
			if slices.Contains(t.Accepts, l) {
				continue
			}
			accepts := "nothing labelled"
			if len(t.Accepts) > 0 {
				accepts = "only " + strings.Join(t.Accepts, ", ")
			}
			reason := fmt.Sprintf("the session carries %q, brought in by call %d (%s), and %s accepts %s", l, o.step, o.call, c.Tool, accepts)
			if ap.Flows && !granted {
				return Decision{Rule: field + ".accepts", Reason: reason + "; the profile sends such calls to a person for approval (approval.flows)", Because: o.step, Approval: true}
			}
			if ap.Flows {
				break
			}
			d := deny(field+".accepts", "", reason, "")
			d.Because = o.step
			return d
		}
	}
	if granted {
		s.Commit(c)
		return Decision{Allow: true, Rule: "approval.session", Reason: fmt.Sprintf("an identical %s call was approved for this session", c.Tool)}
	}
	if need, rule := ap.Needs(c.Tool, t.Class, func() map[string]any { return nativeArgs(c.Args) }); need {
		what := t.Class
		if slices.Contains(profile.DefaultApprovalClasses, t.Class) {
			what += ", cannot be undone"
		}
		return Decision{Rule: rule, Reason: fmt.Sprintf("%s (%s) needs a person's approval", c.Tool, what), Approval: true}
	}
	s.Commit(c)
	return Decision{Allow: true, Rule: field, Reason: ti.allowReason}
}

// Refuses says whether the session refuses the next call of tool
// whatever its arguments: it has been stopped, has spent a budget, or the
// tool is none of the profile's, denied or withdrawn. Such a call is
// decided (and counted) all the same, but nothing it names needs to be
// looked at first.
func (s *Session) Refuses(tool string) bool {
	if s.tripped != nil && s.tripped.Action == "stop" {
		return true
	}
	_, _, refused := s.spent(tool, s.steps)
	return refused
}

// spent is the refusal of the next call of tool whatever its arguments,
// taken steps into the session: its steps or its wall time spent, the
// tool withdrawn, none of the profile's or denied, a budget of calls
// spent. refused is false when the call may be decided on its arguments,
// and ti is then the tool's.
func (s *Session) spent(tool string, taken int) (d Decision, ti *toolInfo, refused bool) {
	b := s.p.Session
	if b == nil {
		b = &noBudgets
	}
	if b.Steps > 0 && taken >= b.Steps {
		return deny("session.steps", "session.steps", fmt.Sprintf("the session has taken its %d steps", b.Steps), ""), nil, true
	}
	if w := b.WallTime(); w > 0 && s.now().Sub(s.start) > w {
		return deny("session.wall", "session.wall", fmt.Sprintf("the session has run for its %s", b.Wall), ""), nil, true
	}
	if w, ok := s.disabled[tool]; ok {
		return deny(w.Rule, "", w.Reason, s.listed()), nil, true
	}
	t, ok := s.p.Tools[tool]
	if !ok {
		return deny("tools", "", fmt.Sprintf("%s is not a tool of this profile", tool), s.listed()), nil, true
	}
	ti = s.info(tool, t)
	field := ti.field
	if t.Deny {
		return deny(field+".deny", "", fmt.Sprintf("the profile denies %s", tool), s.listed()), nil, true
	}
	if b.Calls > 0 && s.calls >= b.Calls {
		return deny("session.calls", "session.calls", fmt.Sprintf("the session has made its %d tool calls", b.Calls), ""), nil, true
	}
	if t.Calls > 0 && s.perTool[tool] >= t.Calls {
		return deny(field+".calls", field+".calls", fmt.Sprintf("%s has been called its %d times in this session", tool, t.Calls), ""), nil, true
	}
	return Decision{}, ti, false
}

// noBudgets are the budgets of a profile without a session section.
var noBudgets profile.Session

// Record records what became of an allowed call at step: when its result
// was shown to the agent (shown; a failure's error or partial output
// included), it brings its labels into the session; the same call failing
// again and again counts toward a loop. A call of the write class that
// names files gives them the labels the session carries, whether it
// failed or not.
func (s *Session) Record(step int, c Call, failed, shown bool) {
	if s.p.Tools[c.Tool].Class == "write" && len(s.labels) > 0 {
		s.scratch = s.labels.appendNames(s.scratch[:0])
		s.fileLabels().add(c, s.scratch)
	}
	if failed {
		s.failed(c)
	} else {
		s.lastFailed, s.fails = "", 0
	}
	if !shown {
		return
	}
	o := originOf(step, c)
	s.scratch = s.resultLabels(append(s.scratch[:0], s.p.Tools[c.Tool].Returns...), c)
	for _, l := range s.scratch {
		s.labels.add(l, o)
	}
}

// failed counts a failure of c toward session.repeats.
func (s *Session) failed(c Call) {
	k := key(c)
	if k == s.lastFailed {
		s.fails++
	} else {
		s.lastFailed, s.fails = k, 1
	}
}

// ResultLabels are the labels of what the call returns: the tool's own,
// those its label rules give by the arguments (a path argument matched as
// the file it resolves to), and those of files the session wrote.
func (s *Session) ResultLabels(c Call) []string {
	return s.resultLabels(slices.Clone(s.p.Tools[c.Tool].Returns), c)
}

// resultLabels appends to out the labels the call's arguments and files
// give its result, and sorts them without repeats.
func (s *Session) resultLabels(out []string, c Call) []string {
	t := s.p.Tools[c.Tool]
	for _, r := range t.Labels {
		v, ok := c.Args[r.Arg].(string)
		if !ok {
			continue
		}
		f, isFile := c.Files[r.Arg]
		switch {
		case !isFile:
			if strings.HasPrefix(v, r.Prefix) && strings.HasSuffix(v, r.Suffix) && (r.Glob == "" || pathglob.Match(r.Glob, v)) {
				out = append(out, r.Labels...)
			}
		case f.Exists && !f.Dir && f.Links > 1, matchFile(r, f.Path, c.Workspace):
			// A file with more than one name has names the call does
			// not show: it carries what any of them could.
			out = append(out, r.Labels...)
		}
	}
	if len(c.Files) > 0 {
		out = s.fileLabels().appendOf(out, c)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// matchFile matches a label rule on a resolved path in workspace ws, both
// in Unicode normal form C: a rule written with "ö" labels a file whose
// name spells it decomposed.
func matchFile(r profile.LabelRule, p, ws string) bool {
	return pathglob.MatchRule(pathglob.Rule{Glob: r.Glob, Prefix: r.Prefix, Suffix: r.Suffix}, p, ws)
}

// MaxFiles is how many files' labels (paths and identities) a FileLabels
// keeps.
const MaxFiles = 4096

// FileLabels are the labels of the files sessions wrote while they carried
// them, by canonical path and by identity (device and inode: a hard link
// is the same file). It is bounded: past MaxFiles entries, the labels it
// cannot keep are given to every file, so that an overflow labels too
// much, never too little. It is safe for concurrent use, so that the
// sessions of one gateway share it: a file one session wrote is labelled
// for the next.
type FileLabels struct {
	mu      sync.Mutex
	m       map[fileKey][]string
	spilled []string
	changes uint64 // counts the changes, for whoever keeps them
}

// fileKey keys a file by its canonical path, or (byID) by its device and
// inode.
type fileKey struct {
	path     string
	dev, ino uint64
	byID     bool
}

// NewFileLabels is an empty set of file labels.
func NewFileLabels() *FileLabels { return &FileLabels{m: map[fileKey][]string{}} }

// ShareFiles makes the session label and look up written files in f
// (shared with other sessions) rather than in a set of its own.
func (s *Session) ShareFiles(f *FileLabels) { s.files = f }

func (s *Session) fileLabels() *FileLabels {
	if s.files == nil {
		s.files = NewFileLabels()
	}
	return s.files
}

// add gives the files a call names the labels ls.
func (f *FileLabels) add(c Call, ls []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Files) == 1 {
		for _, file := range c.Files {
			f.addFile(file, ls)
		}
		return
	}
	for _, arg := range slices.Sorted(maps.Keys(c.Files)) {
		f.addFile(c.Files[arg], ls)
	}
}

// addFile gives a file, by path and by identity, the labels ls.
func (f *FileLabels) addFile(file File, ls []string) {
	f.addKey(fileKey{path: file.Path}, ls)
	if file.Exists {
		f.addKey(identity(file), ls)
	}
}

func (f *FileLabels) addKey(k fileKey, ls []string) {
	if _, ok := f.m[k]; !ok && len(f.m) >= MaxFiles {
		if !containsAll(f.spilled, ls) {
			f.spilled = union(f.spilled, ls)
			f.changes++
		}
		return
	}
	if !containsAll(f.m[k], ls) {
		f.m[k] = union(f.m[k], ls)
		f.changes++
	}
}

// appendOf appends to out the labels of the files a call names; for a
// directory, those of every file written under it too: a listing or a
// search shows their names, and a name can carry what the session that
// wrote it had read.
func (f *FileLabels) appendOf(out []string, c Call) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out = append(out, f.spilled...)
	for _, file := range c.Files {
		out = append(out, f.m[fileKey{path: file.Path}]...)
		if file.Exists {
			out = append(out, f.m[identity(file)]...)
		}
		if file.Dir {
			for k, ls := range f.m {
				if _, in := pathglob.Within(k.path, file.Path); !k.byID && in {
					out = append(out, ls...)
				}
			}
		}
	}
	return out
}

// Len is how many paths and identities f holds.
func (f *FileLabels) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// identity keys a file by its device and inode.
func identity(f File) fileKey { return fileKey{dev: f.Dev, ino: f.Ino, byID: true} }

// union is the sorted labels of a and b without repeats; a itself (sorted,
// without repeats, as union gives) when it holds every label of b.
func union(a, b []string) []string {
	if containsAll(a, b) {
		return a
	}
	out := append(slices.Clone(a), b...)
	sort.Strings(out)
	return slices.Compact(out)
}

// listed suggests the tools the agent may call.
func (s *Session) listed() string {
	var ok []string
	for _, name := range s.p.ToolNames() {
		if _, off := s.disabled[name]; !off && !s.p.Tools[name].Deny {
			ok = append(ok, name)
		}
	}
	if len(ok) == 0 {
		return "this profile allows no tool"
	}
	return "the profile allows " + strings.Join(ok, ", ")
}

func deny(rule, limit, reason, hint string) Decision {
	return Decision{Rule: rule, Limit: limit, Reason: reason, Hint: hint}
}

// key identifies a call by its tool and arguments (JSON orders map keys).
func key(c Call) string {
	b, _ := json.Marshal(c.Args)
	return c.Tool + " " + string(b)
}

// describe is a call in a few words, for a reason.
func describe(c Call) string {
	b, _ := json.Marshal(c.Args)
	if len(b) > 80 {
		b = append(b[:77:77], "..."...)
	}
	if len(c.Args) == 0 {
		return c.Tool
	}
	return c.Tool + " " + string(b)
}

// conjunction writes constraints as one expression.
func conjunction(cs []string) string {
	if len(cs) == 1 {
		return cs[0]
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = "(" + c + ")"
	}
	return strings.Join(parts, " && ")
}
