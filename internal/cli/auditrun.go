package cli

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// defaultCapture is how much of each output stream the log keeps.
const defaultCapture = 4 << 10

// auditor records one run in the audit log: the sandbox's start and the
// action when it starts, then every network decision, the limit that
// stopped it, the outcome and what the agent will read, made durable before
// cordon reports the run.
type auditor struct {
	log      *audit.Log
	id       string
	agent    string
	captures [2]*audit.Capture
	started  chan error

	// folder, made at the first network decision, folds repeated ones.
	foldOnce sync.Once
	folder   *audit.Folder
}

// auditLog is the log that runs of one cordon command are recorded in.
type auditLog struct {
	log       *audit.Log
	capture   int
	retention audit.Retention
}

// openAudit opens the audit log for runs of p: --audit-log, else the
// configuration's. It refuses a log the sandbox could see or write; with
// no profile (no sandbox), it only opens it.
func openAudit(e *env, flagPath string, p *profile.Profile) (*auditLog, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	path := cfg.Audit.Log
	if flagPath != "" {
		path = flagPath
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.cwd, path)
	}
	if where := visibleIn(e, p, e.cwd, path); where != "" {
		return nil, fmt.Errorf("the audit log %s is inside %s, which the sandbox can see: choose another place for it (--audit-log, CORDON_AUDIT_LOG, or the configuration)", path, where)
	}
	o := audit.Options{MaxSize: config.Size(cfg.Audit.MaxSize, audit.DefaultMaxSize)}
	if cfg.Audit.Key != "" {
		if o.Key, err = audit.LoadPrivateKey(cfg.Audit.Key); err != nil {
			return nil, fmt.Errorf("audit signing key: %w", err)
		}
	}
	l, err := audit.Open(path, o)
	if err != nil {
		return nil, err
	}
	ret, err := cfg.Audit.Retention.Policy(filepath.Dir(cfg.File))
	if err != nil {
		return nil, err
	}
	return &auditLog{log: l, capture: int(config.Size(cfg.Audit.Capture, defaultCapture)), retention: ret}, nil
}

// retain removes (or archives) the log's oldest rotated files past the
// configuration's retention, as cordon serve does, recording which first.
// The run is on the record either way: a failure is only reported.
func (l *auditLog) retain(e *env) {
	if _, err := l.log.Retain(l.retention, time.Now()); err != nil {
		fmt.Fprintf(e.stderr, "cordon: warning: %v\n", err)
	}
}

// run starts the record of one sandbox of p, with an id of its own.
func (l *auditLog) run(p *profile.Profile) *auditor {
	return &auditor{log: l.log, id: newRunID(), agent: p.Agent,
		captures: [2]*audit.Capture{audit.NewCapture(l.capture), audit.NewCapture(l.capture)}}
}

// newRunID names a run: 16 random hex digits.
func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// visibleIn names the host path of p's view (the workspace or a bind) that
// holds path, or "" (always for no profile).
func visibleIn(e *env, p *profile.Profile, cwd, path string) string {
	return inView(e, p, cwd, path, false)
}

// writableIn names the host path of p's view that holds path and that the
// sandbox may write on the host (a writable workspace in direct mode, a
// writable bind), or "".
func writableIn(e *env, p *profile.Profile, cwd, path string) string {
	return inView(e, p, cwd, path, true)
}

// inView is visibleIn, or writableIn when writable is set. Where path
// leads is resolved at each call; where the view's paths lead (the
// workspace, the binds: host paths no sandbox has written when the
// checks of a command's start run), once for the command e runs.
func inView(e *env, p *profile.Profile, cwd, path string, writable bool) string {
	if p == nil {
		return ""
	}
	target := resolve(filepath.Dir(path))
	var views []string
	if ws := p.Workspace.Path; ws != "" && (!writable || p.Workspace.Writable && !p.Workspace.Reviewed()) {
		if !filepath.IsAbs(ws) {
			ws = filepath.Join(cwd, ws)
		}
		views = append(views, ws)
	}
	for _, m := range p.Mounts {
		if !writable || m.Writable {
			views = append(views, m.Path)
		}
	}
	for _, v := range views {
		rv, ok := e.views[v]
		if !ok {
			rv = resolve(v)
			if e.views == nil {
				e.views = map[string]string{}
			}
			e.views[v] = rv
		}
		if target == rv || strings.HasPrefix(target+"/", rv+"/") {
			return v
		}
	}
	return ""
}

// resolve resolves links as far as x exists: a path not made yet is where
// its nearest existing parent leads, and then its rest.
func resolve(x string) string {
	x = filepath.Clean(x)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(x); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(x)
		if parent == x {
			return filepath.Join(x, rest)
		}
		rest = filepath.Join(filepath.Base(x), rest)
		x = parent
	}
}

func (a *auditor) event(kind audit.Kind, typ string, data any) audit.Event {
	return audit.Event{Sandbox: a.id, Agent: a.agent, Kind: kind, Type: typ, Data: data}
}

// begin records the start and the action, and writes them while the
// sandbox starts (on the disk with the rest when the run ends).
func (a *auditor) begin(p *profile.Profile, profileFile string, argv []string, cwd string, lookup func(string) (string, bool)) {
	a.log.Add(a.startEvent(p, profileFile), a.execEvent(p, argv, cwd, lookup))
	a.started = make(chan error, 1)
	go func() { a.started <- a.log.Write() }() // durable with the rest, at the end
}

// startEvent is the record of a sandbox's start: its profile, host,
// limits, workspace and network.
func (a *auditor) startEvent(p *profile.Profile, profileFile string) audit.Event {
	var uts unix.Utsname
	unix.Uname(&uts)
	host, _ := os.Hostname()
	limits := map[string]string{}
	for _, l := range profile.Limits {
		limits[l.Name] = p.Resources.Get(l.Name).String()
	}
	var allow []string
	for _, d := range p.Network.Allow {
		allow = append(allow, d.Dest)
	}
	if profileFile == "" {
		profileFile = profile.DefaultName
	}
	return a.event(audit.Decision, "start", map[string]any{
		"profile": profileFile, "profile_sha256": p.Hash(),
		"host":   map[string]any{"name": host, "kernel": unix.ByteSliceToString(uts.Release[:]), "arch": unix.ByteSliceToString(uts.Machine[:]), "uid": os.Geteuid()},
		"limits": limits, "workspace": p.Workspace, "network_allow": allow,
	})
}

// execEvent is the record of a command run in the sandbox: its argv, its
// directory and the names of its environment.
func (a *auditor) execEvent(p *profile.Profile, argv []string, cwd string, lookup func(string) (string, bool)) audit.Event {
	var names []string
	for _, kv := range p.Environ(lookup) {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	return a.event(audit.Action, "exec", map[string]any{"argv": argv, "cwd": cwd, "env": names})
}

// watch has the sandbox tell the log what the agent will read and each
// network decision as the proxy makes it (written at once, durable with the
// end of the run).
func (a *auditor) watch(opts *sandbox.Options) {
	opts.Taps = [2]io.Writer{a.captures[0], a.captures[1]}
	opts.OnEgress = a.network
}

// network records a network decision of the sandbox's proxy, or counts it
// as a repeat of one recorded: of the same protocol, destination, rule,
// decision and reason (see audit.Folder).
func (a *auditor) network(ev egress.Event) {
	a.foldOnce.Do(func() { a.folder = audit.NewFolder(a.log, audit.FoldEvery, audit.RunRecords) })
	e := a.event(audit.Decision, "network", ev)
	e.Time = ev.Time.UTC()
	if a.folder == nil { // after endNetwork
		a.log.Add(e)
		go a.log.Write()
		return
	}
	a.folder.Add(e, networkKey{Protocol: ev.Protocol, Host: ev.Host, Port: ev.Port, Rule: ev.Rule, Decision: ev.Decision, Reason: ev.Reason})
}

// networkKey is what repeated network decisions share.
type networkKey struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Rule     string `json:"rule,omitempty"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// endNetwork records the repeated network decisions still counted, and
// what the run's budget of records left unrecorded.
func (a *auditor) endNetwork() {
	a.foldOnce.Do(func() {})
	if a.folder != nil {
		a.folder.Close()
	}
}

// end records how the run went and makes it all durable.
func (a *auditor) end(o outcome.Outcome, tty bool) error {
	a.endNetwork()
	if o.Limit != nil {
		a.log.Add(a.event(audit.Decision, "limit", map[string]any{"name": o.Limit.Name, "value": o.Limit.Value, "status": o.Status}))
	}
	a.log.Add(a.event(audit.Decision, "outcome", o))
	if c := o.Changes; c != nil {
		a.log.Add(a.event(audit.Action, "changes", c))
	}
	if c := o.Caches; c != nil {
		// What the run could leave for the agent's next runs.
		a.log.Add(a.event(audit.Action, "caches", c))
	}
	streams := []string{"stdout", "stderr"}
	if tty {
		streams = []string{"terminal"}
	}
	for i, s := range streams {
		a.log.Add(a.event(audit.Input, "result", a.captures[i].Summary(s)))
	}
	err := <-a.started
	if serr := a.log.Seal(); err == nil {
		err = serr
	}
	return err
}
