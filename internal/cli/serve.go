package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/server"
	"github.com/cordon-sandbox/cordon/internal/statedb"
	"github.com/cordon-sandbox/cordon/internal/version"
)

// serveCmd implements `cordon serve --config FILE` and `cordon serve token`.
func serveCmd(e *env, args []string) int {
	if len(args) > 0 && args[0] == "token" {
		token, sum := server.NewToken()
		fmt.Fprintf(e.stdout, "token:  %s\nsha256: %s\n", token, sum)
		fmt.Fprintln(e.stderr, "cordon: give the token to its holder once; put only the sha256 in the configuration's tokens")
		return 0
	}
	gateway.TuneGC() // a long-lived relay of MCP messages and API requests
	exe := sandbox.SealedCopy()
	defer exe.Close()
	fs := newFlags(e, "serve", "serve --config FILE [flags] | serve token")
	var f serveFlags
	f.register(fs)
	cfgFile, listen, auditLog, storeDir := &f.config, &f.listen, &f.auditLog, &f.store
	if err := parseFlags(fs, args); err != nil {
		return fail(e, err)
	}
	degraded := f.degraded
	if *cfgFile == "" || fs.NArg() > 0 {
		fs.Usage()
		return fail(e, errors.New("serve: give the configuration with --config FILE"))
	}
	allow, err := degradedLayers(degraded)
	if err != nil {
		return fail(e, err)
	}
	cfg, err := server.LoadConfig(*cfgFile)
	if err != nil {
		return fail(e, err)
	}
	for _, a := range cfg.Agents {
		for _, w := range a.Warnings {
			fmt.Fprintf(e.stderr, "cordon: agent %s: %s\n", a.Name, w)
		}
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if f.node != "" {
		cfg.Node = f.node
	}
	if err := cfg.FromEnv(func(k string) string { v, _ := e.getenv(k); return v }); err != nil {
		return fail(e, err)
	}
	// The secrets the environment gave cordon serve reach no sandbox,
	// whatever a profile's env.pass says, nor any process it starts.
	for _, k := range []string{"CORDON_CLUSTER_SECRET", "CORDON_DATABASE"} {
		os.Unsetenv(k)
	}
	state := cfg.State
	if state == "" {
		state = filepath.Join(config.StateDir(), "serve")
	}
	if err := os.MkdirAll(state, 0o711); err != nil {
		return fail(e, fmt.Errorf("state directory: %w", err))
	}
	cfg.State = state
	if cfg.Database == "" {
		cfg.Database = filepath.Join(state, "db", "cordon.db")
	}
	if f.drain {
		return drainNode(e, cfg)
	}
	al, err := openAudit(e, *auditLog, nil)
	if err != nil {
		return fail(e, fmt.Errorf("audit log: %w", err))
	}
	// A sandbox's relative workspace is a directory of its own under
	// state/sandboxes: what it sees is checked from there.
	sandboxDir := filepath.Join(state, "sandboxes", "sb")
	for _, a := range cfg.Agents {
		// An agent that could write any of these could approve its own
		// calls, give itself a token, or rewrite what it is recorded doing
		// (or what the next server removes, the journal);
		// one that could read the cluster's secret could pose as a node
		// forwarding its requests (past its rate, from any address).
		for _, f := range []struct{ what, path string }{{"audit log", al.log.Path()}, {"database", statedb.File(cfg.Database)}, {"configuration", cfg.File}, {"spool directory", filepath.Join(state, "spool")}, {"cluster secret", cfg.ClusterSecretFile()},
			{"change sets' directory", filepath.Join(state, "changes", "set")}, {"layers' directory", filepath.Join(state, "layers", "layer")},
			{"journal", filepath.Join(server.JournalDir(state), "entry")}} {
			if f.path == "" {
				continue
			}
			if where := visibleIn(e, a.Loaded, sandboxDir, f.path); where != "" {
				return fail(e, fmt.Errorf("agent %s: the %s %s is inside %s, which its sandboxes can see", a.Name, f.what, f.path, where))
			}
		}
	}
	// An agent's profile is judged as cordon run judges one, once what
	// the server keeps is known to be out of its sandboxes' reach.
	for _, a := range cfg.Agents {
		if errs := lintErrors(a.ProfileFile, a.Loaded); len(errs) > 0 {
			name := cmp.Or(a.ProfileFile, profile.DefaultName)
			if !f.allowLintErrors {
				return fail(e, fmt.Errorf("agent %s: %w", a.Name, lintRefusal(name, errs)))
			}
			lintWarning(e, name, errs)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	db, err := statedb.Open(ctx, cfg.Database)
	cancel()
	if err != nil {
		return fail(e, err)
	}
	defer db.Close()
	var store *approvals.Store
	if *storeDir == "" {
		store, err = approvals.OpenJournal(db.Approvals(), nil)
	} else {
		store, err = openApprovalStore(*storeDir)
	}
	if err != nil {
		return fail(e, fmt.Errorf("approval store: %w", err))
	}
	// The registry may ask this node to drain (cordon serve --drain): as
	// a SIGTERM.
	sigs := make(chan os.Signal, 2)
	onDrain := func() {
		select {
		case sigs <- syscall.SIGTERM:
		default:
		}
	}
	gateway := func(ctx context.Context, a *server.Agent, p *profile.Profile, record func(...audit.Event) error) (http.Handler, func(), error) {
		layers := maps.Clone(allow)
		for _, l := range p.AllowDegraded {
			layers[l] = true
		}
		g, err := gatewayFor(ctx, e, p, a.ProfileFile, layers, degraded, al, store, record)
		if err != nil {
			return nil, nil, err
		}
		go g.Recover(ctx)
		// Every token of the agent is the agent to the gateway (its
		// labels and budgets), and its sessions are the agent's: bounded
		// in number, ended when idle.
		h, err := g.HTTPHandler(gateway.HTTPOptions{AnyOrigin: true, Identify: func(tok string) (string, bool) {
			t := cfg.Identify(tok)
			return a.Name, t != nil && !t.Admin && t.Agent == a.Name
		}})
		if err != nil {
			g.Close()
			return nil, nil, err
		}
		return h, g.Close, nil
	}
	// Each agent's sandbox is built once before the server listens: a
	// layer this host cannot give, and that neither the flags nor the
	// profile let go, stops cordon serve here, as it stops cordon run,
	// instead of failing every request later.
	// What a server killed before this one left (its sandboxes' cgroups
	// and placeholders) goes before any sandbox starts.
	sweepJournal(e, server.JournalDir(state))
	start := server.Boxes(exe, state, allow, e.stderr)
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		p, err := a.Current()
		if err != nil {
			continue // refused: the server answers 503 until it is fixed
		}
		box, err := start(a, p, fmt.Sprintf("check-%s-%d", name, os.Getpid()))
		if err != nil {
			return fail(e, fmt.Errorf("agent %s: %w", name, err))
		}
		box.Close()
	}
	srv, err := server.New(server.Options{
		Config: cfg, Start: start, Audit: al.log, Approvals: store,
		Log: e.stderr, Version: version.String(), Probe: probeAgent(degraded), DB: db, Node: cfg.Node, Gateway: gateway, StateDir: state, OnDrain: onDrain,
		SpoolDir: filepath.Join(state, "spool"), // made private by the server
	})
	if err != nil {
		return fail(e, err)
	}
	defer srv.Close()
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil {
		if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
			fmt.Fprintf(e.stderr, "cordon: warning: listening on %s without TLS: tokens cross the network in clear; put a TLS proxy in front\n", cfg.Listen)
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fail(e, fmt.Errorf("listen: %w", err))
	}
	fmt.Fprintf(e.stderr, "cordon: serving http://%s%s (agents: %d, tokens: %d)\n", ln.Addr(), "/v1", len(cfg.Agents), len(cfg.Tokens))
	hs := srv.HTTPServer()
	ln = srv.Listener(ln)
	if w := fdBudget(cfg.HTTP.MaxConnections); w != "" {
		fmt.Fprintf(e.stderr, "cordon: warning: %s\n", w)
	}
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	flush, err := traced(context.Background(), e, "cordon-serve")
	if err != nil {
		return fail(e, err)
	}
	defer flush()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-sigs
		drain(e, srv, hs, cfg.Grace, sigs)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(e, err)
	}
	<-stopped
	return 0
}

// serveFlags are cordon serve's flags.
type serveFlags struct {
	config, listen, auditLog, store, node string
	degraded                              list
	drain, allowLintErrors                bool
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "the server's configuration `FILE` (agents, profiles, pools, tokens)")
	fs.StringVar(&f.listen, "listen", "", "listen on `ADDR` (default: the configuration's, else "+server.DefaultListen+")")
	fs.Var(&f.degraded, "allow-degraded", "build sandboxes even if `LAYER` is unavailable; repeatable or comma-separated")
	fs.StringVar(&f.auditLog, "audit-log", "", "the audit log `FILE` (default: the configuration's, see cordon audit)")
	fs.StringVar(&f.node, "node", "", "this node's `NAME` in the database, the same across restarts (default: the configuration's node, CORDON_NODE, else the host's name)")
	fs.BoolVar(&f.drain, "drain", false, "ask the node (--node, or this configuration's) to drain: it takes no new sandboxes, lets running commands finish within drain_grace, then stops; waits for it")
	fs.BoolVar(&f.allowLintErrors, "allow-lint-errors", false, "serve agents whose profile cordon lint rates an error (each is named on stderr)")
	fs.StringVar(&f.store, "approval-store", "", "the approval store the admin API decides in: a `DIR`, an SQLite file or a postgres:// URL (default: the configuration's database)")
}

// drain stops cordon serve on a signal: no new connections or requests
// (503), the running commands finish within grace, then every sandbox
// ends; another signal on sigs cuts the grace short.
func drain(e *env, srv *server.Server, hs *http.Server, grace time.Duration, sigs <-chan os.Signal) {
	fmt.Fprintf(e.stderr, "cordon: stopping: no new requests; running commands have %s to finish (a second signal ends them now)\n", grace)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			fmt.Fprintln(e.stderr, "cordon: stopping now")
			cancel()
		case <-ctx.Done():
		}
	}()
	go hs.Shutdown(ctx) // closes the listener; idle connections close
	if err := srv.Drain(ctx); err != nil {
		fmt.Fprintf(e.stderr, "cordon: %v: their sandboxes are ended\n", err)
	}
	fmt.Fprintln(e.stderr, "cordon: stopping: ending every sandbox")
	srv.Close()
	hs.Close()
}

// probeAgent returns the server's probe runner: cordon probe on the
// agent's profile, recorded, in a process of its own (the probes plant
// their targets, a canary variable among them, in cordon's own process).
func probeAgent(degraded list) func(ctx context.Context, a *server.Agent, p *profile.Profile) (server.ProbeResult, error) {
	return func(ctx context.Context, a *server.Agent, p *profile.Profile) (server.ProbeResult, error) {
		self, err := os.Executable()
		if err != nil {
			return server.ProbeResult{}, err
		}
		args := []string{"probe", "--record", "--json"}
		if a.ProfileFile != "" {
			args = append(args, "--profile", a.ProfileFile)
		}
		for _, l := range degraded {
			args = append(args, "--allow-degraded", l)
		}
		cmd := exec.CommandContext(ctx, self, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// A workspace of its own: the probes write into it.
		dir, err := os.MkdirTemp("", "cordon-serve-probe-")
		if err != nil {
			return server.ProbeResult{}, err
		}
		defer os.RemoveAll(dir)
		cmd.Dir = dir
		out, runErr := cmd.Output()
		var r probe.Report
		if err := json.Unmarshal(out, &r); err != nil {
			return server.ProbeResult{}, fmt.Errorf("%v: %s", runErr, strings.TrimSpace(stderr.String()))
		}
		res := server.ProbeResult{Statuses: map[string]int{}}
		for _, pr := range r.Results {
			res.Statuses[string(pr.Status)]++
			if pr.Status == probe.Escaped {
				res.Escaped = append(res.Escaped, pr.ID)
			}
		}
		return res, nil
	}
}

// openApprovalStore opens the approval store at where: a directory, an
// SQLite file (cordon serve's database), or a postgres:// URL (the
// journal several hosts share).
func openApprovalStore(where string) (*approvals.Store, error) {
	if !statedb.IsPostgres(where) && !statedb.IsSQLite(where) {
		return approvals.Open(where, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := statedb.Open(ctx, where)
	if err != nil {
		return nil, err
	}
	return approvals.OpenJournal(db.Approvals(), nil)
}

// fdBudget warns when max_connections leaves too few of the process's
// descriptors for the rest (sandboxes, the audit log, the database).
func fdBudget(maxConns int) string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return ""
	}
	const reserve = 256
	if uint64(maxConns)+reserve > lim.Cur {
		return fmt.Sprintf("http.max_connections (%d) leaves fewer than %d of the %d open files this process may have for its sandboxes, audit log and database: lower it or raise the limit (ulimit -n)", maxConns, reserve, lim.Cur)
	}
	return ""
}

// drainNode asks a node, through the database, to drain (its next
// heartbeat sees it), and waits until it has stopped.
func drainNode(e *env, cfg *server.Config) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	db, err := statedb.Open(ctx, cfg.Database)
	cancel()
	if err != nil {
		return fail(e, err)
	}
	defer db.Close()
	name := cfg.Node
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	n, err := db.NodeByName(ctx, name)
	if err == nil && n.State == statedb.NodeAlive {
		_, err = db.SetNodeState(ctx, name, n.Incarnation, statedb.NodeAlive, statedb.NodeDraining)
	}
	cancel()
	switch {
	case errors.Is(err, statedb.ErrNotFound):
		return fail(e, fmt.Errorf("drain: no node %s in %s", name, db.Name()))
	case err != nil:
		return fail(e, fmt.Errorf("drain: %w", err))
	case n.State != statedb.NodeAlive && n.State != statedb.NodeDraining:
		fmt.Fprintf(e.stderr, "cordon: node %s is %s already\n", name, n.State)
		return 0
	}
	fmt.Fprintf(e.stderr, "cordon: node %s drains: no new sandboxes; running commands have %s to finish\n", name, cfg.Grace)
	// Its heartbeat sees the request, its drain takes the grace, and its
	// sandboxes then end.
	_, timeout := cfg.Cluster.Times()
	deadline := time.Now().Add(cfg.Grace + 2*timeout + time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		now, err := db.NodeByName(ctx, name)
		cancel()
		if err == nil && (now.State == statedb.NodeLeft || now.State == statedb.NodeDead || now.State == statedb.NodeLost || now.Incarnation != n.Incarnation) {
			fmt.Fprintf(e.stderr, "cordon: node %s has stopped (%s)\n", name, now.State)
			return 0
		}
	}
	return fail(e, fmt.Errorf("drain: node %s has not stopped by %s", name, deadline.Format(time.RFC3339)))
}
