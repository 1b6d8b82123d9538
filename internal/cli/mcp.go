package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/labelstore"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
	"github.com/cordon-sandbox/cordon/internal/version"
)

// mcpCmd implements `cordon mcp [flags]`: the MCP tool gateway for one
// profile, on stdin and stdout or over streamable HTTP. `cordon mcp tools`
// lists the upstream servers' tools with their pins instead.
func mcpCmd(e *env, args []string) int {
	listOnly := len(args) > 0 && args[0] == "tools"
	if listOnly {
		args = args[1:]
	}
	usage := "mcp [flags]"
	if listOnly {
		usage = "mcp tools [flags]"
	}
	gateway.TuneGC() // a long-lived relay of MCP messages
	fs := newFlags(e, "mcp", usage)
	var f mcpFlags
	f.register(fs)
	pf, auditLog, addr, jsonOut, saveFile, diffFile, storeDir := &f.pf, &f.auditLog, &f.addr, &f.json, &f.save, &f.diff, &f.store
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	degraded, origins := f.degraded, f.origins
	if len(operands) > 0 {
		fs.Usage()
		return fail(e, fmt.Errorf("mcp: unexpected %q", operands[0]))
	}
	p, allow, al, err := pf.open(e, degraded, *auditLog)
	if err != nil {
		return fail(e, err)
	}
	if !listOnly {
		sweepJournal(e, journalDirs(e, p)...)
	}
	if !listOnly && !offersTools(p) {
		return fail(e, noTools(pf.file))
	}
	file := ""
	if pf.file != "" {
		file = pf.abs(e, pf.file)
	}
	var clients []config.Token
	if !listOnly {
		if clients, err = mcpClients(e, p, file, *addr != ""); err != nil {
			return fail(e, err)
		}
	}
	// Listing the tools holds no call: it needs no approval store.
	var store *approvals.Store
	if !listOnly {
		if *storeDir == "" {
			*storeDir = approvals.DefaultDir()
		}
		if !strings.Contains(*storeDir, "://") {
			// A store a sandbox could write (the agent's, or a tool
			// server's) is one the agent could approve its own calls in.
			abs := pf.abs(e, *storeDir)
			if err := outsideViews(e, p, file, filepath.Join(abs, "x")); err != nil {
				return fail(e, fmt.Errorf("the approval store %s: %w; choose another place for it (--approval-store)", *storeDir, err))
			}
		}
		if err := outsideViews(e, p, file, al.log.Path()); err != nil {
			return fail(e, fmt.Errorf("the audit log %s: %w; choose another place for it", al.log.Path(), err))
		}
		if store, err = openApprovalStore(*storeDir); err != nil {
			return fail(e, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	flush, err := traced(ctx, e, "cordon-mcp")
	if err != nil {
		return fail(e, err)
	}
	defer flush()
	if !listOnly && (*saveFile != "" || *diffFile != "") {
		return fail(e, fmt.Errorf("mcp: --save and --diff are for cordon mcp tools"))
	}
	// Listing tries each server once; serving keeps them up.
	restart := gateway.Restart{KeepAlive: 30 * time.Second}
	if listOnly {
		restart = gateway.Restart{Once: true}
	}
	g, err := newGateway(ctx, e, p, file, allow, degraded, al, store, al.log.Append, restart, f.pf.allowLintErrors)
	if err != nil {
		return fail(e, err)
	}
	defer g.Close()
	if listOnly {
		return mcpTools(e, p, g, toolsOutput{json: *jsonOut, save: *saveFile, diff: *diffFile})
	}
	// Approved calls whose session is gone (a restart) run once, here.
	go g.Recover(ctx)
	if *addr == "" {
		err = g.Server().Run(ctx, g.Stdio(os.Stdin, os.Stdout))
		if err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			return fail(e, fmt.Errorf("mcp: %w", err))
		}
		return 0
	}
	return serveHTTP(ctx, e, g, *addr, clients, origins)
}

// mcpFlags are the flags of cordon mcp and cordon mcp tools, one set for
// both.
type mcpFlags struct {
	pf                                profileFlags
	degraded, origins                 list
	auditLog, addr, save, diff, store string
	json                              bool
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	f.pf.register(fs)
	f.pf.registerLintGate(fs)
	fs.Var(&f.degraded, "allow-degraded", "run the tools' sandboxes even if `LAYER` ("+strings.Join(sandbox.DegradableLayers, ", ")+") is unavailable; repeatable or comma-separated")
	fs.StringVar(&f.auditLog, "audit-log", "", "append the calls' audit events to `FILE` (default: the configuration's)")
	fs.StringVar(&f.addr, "http", "", "serve streamable HTTP on `ADDR` (a loopback address and port) instead of stdin and stdout, to the clients of the configuration's mcp_clients")
	fs.Var(&f.origins, "allow-origin", "--http: also serve browsers on the web `ORIGIN` (scheme://host:port); repeatable")
	fs.BoolVar(&f.json, "json", false, "mcp tools: print JSON")
	fs.StringVar(&f.save, "save", "", "mcp tools: keep the tools' definitions, by pin, in `FILE` (beside the profile), for --diff")
	fs.StringVar(&f.diff, "diff", "", "mcp tools: show what changed in each tool since the definition its pin approved, kept in `FILE` by --save")
	fs.StringVar(&f.store, "approval-store", "", "hold calls that need approval in `STORE`: a directory, an SQLite database or a postgres:// URL (default: $CORDON_STATE_DIR/approvals or ~/.local/state/cordon/approvals)")
}

// mcpClients reads the MCP clients of cordon's configuration, which
// --http (needed) serves; the configuration, which names who may decide
// held calls and who may call, must be out of the agent's reach.
func mcpClients(e *env, p *profile.Profile, file string, needed bool) ([]config.Token, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	if cfg.File != "" && len(cfg.Approvers)+len(cfg.MCPClients) > 0 {
		if err := outsideViews(e, p, file, cfg.File); err != nil {
			return nil, fmt.Errorf("the configuration %s, which names approvers and MCP clients: %w; choose another place for it (CORDON_CONFIG)", cfg.File, err)
		}
	}
	if needed && len(cfg.MCPClients) == 0 {
		return nil, fmt.Errorf("--http: no MCP client may connect: the configuration (%s) names none. Make a token with cordon serve token, add its name and sha256 under mcp_clients there, and give the token to the client, which sends it as Authorization: Bearer TOKEN", config.Path())
	}
	return cfg.MCPClients, nil
}

// outsideViews says where path is inside the view of p's sandboxes or of
// one of its tool servers' (profile file is p's, "" for the embedded one);
// nil when it is in none.
func outsideViews(e *env, p *profile.Profile, file, path string) error {
	if where := visibleIn(e, p, e.cwd, path); where != "" {
		return fmt.Errorf("inside %s, which the agent's sandboxes can see", where)
	}
	dir := e.cwd
	if file != "" {
		dir = filepath.Dir(file)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Servers)) {
		srv := p.Servers[name]
		if srv.Profile == "" {
			continue
		}
		sf := srv.Profile
		if !filepath.IsAbs(sf) {
			sf = filepath.Join(dir, sf)
		}
		sp, err := profile.LoadFile(sf)
		if err != nil {
			return fmt.Errorf("servers.%s.profile: %w", name, err)
		}
		if where := visibleIn(e, sp, e.cwd, path); where != "" {
			return fmt.Errorf("inside %s, which the sandbox of the tool server %s can see", where, name)
		}
	}
	return nil
}

// gatewayFor builds the MCP gateway of profile p, read from file ("" for
// the embedded default): its built-in tools run in sandboxes as cordon run
// would, its upstream servers as the profile says; calls that need approval
// wait in store, and record receives the audit events.
func gatewayFor(ctx context.Context, e *env, p *profile.Profile, file string, allow map[string]bool, degraded list, al *auditLog,
	store *approvals.Store, record func(...audit.Event) error) (*gateway.Gateway, error) {
	return newGateway(ctx, e, p, file, allow, degraded, al, store, record, gateway.Restart{KeepAlive: 30 * time.Second}, true)
}

// newGateway is gatewayFor with restart saying how its upstream servers
// are kept up, and allowLint whether their profiles may have lint errors
// (cordon serve does not judge its agents' profiles by lint; cordon mcp
// does, as --allow-lint-errors says).
func newGateway(ctx context.Context, e *env, p *profile.Profile, file string, allow map[string]bool, degraded list, al *auditLog,
	store *approvals.Store, record func(...audit.Event) error, restart gateway.Restart, allowLint bool) (*gateway.Gateway, error) {
	ups, err := upstreamTransports(e, file, p, degraded, allowLint)
	if err != nil {
		return nil, err
	}
	profileFile := "<default profile>"
	if file != "" {
		profileFile = file
	}
	r := &probeRunner{e: e, allow: allow, audit: al, guard: guarded(file)}
	labels, err := openFileLabels(e, p, file)
	if err != nil {
		return nil, err
	}
	known := toolpolicy.NewFileLabels()
	if err := labels.Load(known); err != nil {
		return nil, fmt.Errorf("%w; the labels of files written by labelled sessions are not dropped: repair or remove the file to go on", err)
	}
	// A reviewed workspace: each session's calls share one sandbox.
	sessions, err := newSessionSandboxes(e, p, file, r)
	if err != nil {
		return nil, err
	}
	boxes := newResolveBoxes(e, r)
	return gateway.New(ctx, gateway.Config{
		FileLabels:     known,
		SaveFileLabels: labels.Save,
		Profile:        p,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			if !sessions.inSession(ctx) {
				if err := oneShotRefused(p, tool); err != nil {
					return nil, false, err
				}
			}
			return runBuiltin(sessions.execFor(ctx, r.oneShot(p)), tool, args, expects(p, gateway.DecidedFiles(ctx)))
		},
		OnClose: func() {
			sessions.close()
			boxes.close()
		},
		Resolve:   resolver(e, p, file, r, sessions, boxes),
		Reach:     reacher(p, r, sessions),
		Changed:   changer(e, p, file, r, sessions, boxes),
		Workspace: viewWorkspace(e, p),
		Dial:      ups,
		Restart:   restart,
		Record:    record,
		NewID:     newSessionID,
		Version:   version.String(),
		Logf: func(format string, args ...any) {
			fmt.Fprintf(e.stderr, "cordon: %s\n", termsafe.Line(fmt.Sprintf(format, args...)))
		},
		Approvals:   store,
		ProfileFile: profileFile,
	})
}

// serveHTTP serves the gateway over streamable HTTP until ctx ends, on
// loopback, to the clients whose tokens the configuration names (and to
// browsers only of the allowed origins).
func serveHTTP(ctx context.Context, e *env, g *gateway.Gateway, addr string, clients []config.Token, origins []string) int {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fail(e, fmt.Errorf("--http %s: %v", addr, err))
	}
	if ip, err := netip.ParseAddr(host); (err != nil && host != "localhost") || (err == nil && !ip.IsLoopback()) {
		return fail(e, fmt.Errorf("--http %s: listen on a loopback address (127.0.0.1:PORT)", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(e, fmt.Errorf("--http: %w", err))
	}
	h, err := g.HTTPHandler(gateway.HTTPOptions{
		Identify: func(tok string) (string, bool) { return config.Identify(clients, tok) },
		Addr:     ln.Addr().String(),
		Origins:  origins,
	})
	if err != nil {
		ln.Close()
		return fail(e, fmt.Errorf("--allow-origin: %w", err))
	}
	fmt.Fprintf(e.stderr, "cordon: MCP gateway on http://%s/mcp\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(e, fmt.Errorf("--http: %w", err))
	}
	return 0
}

// upstreamTransports starts nothing yet: it returns, for each server of p,
// how to reach it, anew for each start. A command runs as `cordon run` with
// the server's own profile (a file beside p's); a URL is reached through an
// egress proxy with p's network rules.
func upstreamTransports(e *env, file string, p *profile.Profile, degraded list, allowLint bool) (map[string]func() (mcp.Transport, error), error) {
	out := map[string]func() (mcp.Transport, error){}
	if len(p.Servers) == 0 {
		return out, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir := e.cwd
	if file != "" {
		dir = filepath.Dir(file)
	}
	for name, srv := range p.Servers {
		if srv.URL != "" {
			client, err := egressClient(e, name, p)
			if err != nil {
				return nil, err
			}
			endpoint := srv.URL
			out[name] = func() (mcp.Transport, error) {
				return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client, MaxRetries: -1}, nil
			}
			continue
		}
		file := srv.Profile
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		// Read now, so that a mistake in it is reported before anything
		// starts, with its place in the file.
		sp, err := profile.LoadFile(file)
		if err != nil {
			return nil, fmt.Errorf("servers.%s.profile: %w", name, err)
		}
		// Its lint errors are judged here, once, before anything starts;
		// its runs go on with those allowed, and say so.
		if errs := lintErrors(file, sp); len(errs) > 0 {
			if !allowLint {
				return nil, fmt.Errorf("servers.%s.profile: %w", name, lintRefusal(file, errs))
			}
			lintWarning(e, file, errs)
		}
		argv := []string{"run", "--profile", file, "--allow-lint-errors"}
		argv = append(argv, serverView(e, p, name, sp)...)
		for _, l := range degraded {
			argv = append(argv, "--allow-degraded", l)
		}
		argv = append(argv, "--")
		argv = append(argv, srv.Command...)
		stderr := prefixWriter{w: e.stderr, prefix: "cordon: server " + name + ": "}
		limit := gateway.ResultCap(p)
		out[name] = func() (mcp.Transport, error) {
			cmd := exec.Command(self, argv...)
			cmd.Dir = e.cwd
			cmd.Stderr = stderr
			// An answer past the profile's bound fails its call, and is
			// never taken for a server that broke.
			return gateway.CommandTransport(cmd, limit, func(o gateway.Oversized) {
				fmt.Fprintf(e.stderr, "cordon: server %s: an answer of %d bytes (sha256 %s) is more than the bound of %d bytes: its call fails\n", name, o.Bytes, o.SHA256, limit)
			}), nil
		}
	}
	return out, nil
}

// openFileLabels is the store of the labels of files that labelled
// sessions of p's agents wrote in its workspace, in cordon's state,
// which no sandbox of p (or of its tool servers) may see: an agent that
// could write it could clear them.
func openFileLabels(e *env, p *profile.Profile, file string) (*labelstore.Store, error) {
	dir := filepath.Join(config.StateDir(), "labels")
	if err := outsideViews(e, p, file, filepath.Join(dir, "x")); err != nil {
		return nil, fmt.Errorf("cordon's state directory %s, where the labels of written files are kept: %w; set CORDON_STATE_DIR elsewhere", config.StateDir(), err)
	}
	ws := e.cwd
	if p.Workspace.Path != "" {
		ws = workspacePath(e, p)
	}
	return labelstore.Open(dir, ws)
}

// serverView narrows the workspace of server's sandbox (of profile sp) to
// what the tools p offers of it can be allowed to write: read-only, but
// for the directories their constraints hold every path within
// (Profile.ServerWrites), when they exist. It returns the arguments of
// cordon run that say so; none when sp's workspace is read-only already,
// is judged on a layer of its own (review, guarded), or a tool may write
// anywhere. A name the server is sent and walks again cannot lead it to
// write where no decision could allow.
func serverView(e *env, p *profile.Profile, server string, sp *profile.Profile) []string {
	dirs, bounded := p.ServerWrites(server)
	if !bounded || sp.Workspace.Path == "" || !sp.Workspace.Writable || sp.Workspace.Mode != "" && sp.Workspace.Mode != profile.ModeDirect {
		return nil
	}
	ws := workspacePath(e, sp)
	view := viewWorkspace(e, sp)
	if view != ws {
		// --rw binds at the host's path: a workspace seen elsewhere
		// (workspace.target) is left as the server's profile says.
		fmt.Fprintf(e.stderr, "cordon: server %s: its workspace is seen at %s, not where it is on this host: it is bound as its profile says, writable where the profile says\n", server, termsafe.Line(view))
		return nil
	}
	out := []string{"--ro-workspace"}
	var kept []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(view, d)
		}
		rel, err := filepath.Rel(view, filepath.Clean(d))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue // outside the workspace: the server's profile decides
		}
		if rel == "." {
			return nil // all of it
		}
		host := filepath.Join(ws, rel)
		if fi, err := os.Lstat(host); err != nil || !fi.IsDir() {
			fmt.Fprintf(e.stderr, "cordon: server %s: %s is not a directory, so the server cannot write there\n", server, termsafe.Line(host))
			continue
		}
		out = append(out, "--rw", host)
		kept = append(kept, rel)
	}
	if len(kept) == 0 {
		kept = append(kept, "nothing")
	}
	fmt.Fprintf(e.stderr, "cordon: server %s: its workspace is read-only but for %s (what its tools' constraints let them write)\n", server, termsafe.Line(strings.Join(kept, ", ")))
	return out
}

// egressClient is an HTTP client whose every connection goes through an
// egress proxy with p's network rules, as a sandbox's would.
func egressClient(e *env, server string, p *profile.Profile) (*http.Client, error) {
	pol, err := p.Network.Policy()
	if err != nil {
		return nil, err
	}
	px := &egress.Proxy{Policy: pol, OnDeny: func(reason string) {
		fmt.Fprintf(e.stderr, "cordon: server %s: egress denied: %s\n", server, termsafe.Line(reason))
	}}
	proxyURL := &url.URL{Scheme: "http", Host: "cordon-egress"}
	tr := &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, s := net.Pipe()
			go px.Serve(s)
			return c, nil
		},
		ForceAttemptHTTP2: false,
	}
	return &http.Client{Transport: tr}, nil
}

// prefixWriter writes each line with a prefix. The lines are a tool
// server's, shown as cordon's: escaped and cut (termsafe), so that no escape
// sequence or forged line of the server's reaches the operator's terminal.
type prefixWriter struct {
	w      interface{ Write([]byte) (int, error) }
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			p.w.Write([]byte(p.prefix + termsafe.Line(strings.TrimSuffix(line, "\n")) + "\n"))
		}
	}
	return len(b), nil
}

func newSessionID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
