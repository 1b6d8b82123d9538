package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// approvalsCmd implements `cordon approvals list|show|approve|deny|serve`:
// the queue of tool calls held for a person's approval.
func approvalsCmd(e *env, args []string) int {
	if len(args) == 0 {
		return fail(e, fmt.Errorf("approvals: list, show ID, approve ID, deny ID, or serve --http ADDR"))
	}
	sub, args := args[0], args[1:]
	fs := newFlags(e, "approvals "+sub, "approvals "+sub+" [flags]")
	var f approvalsFlags
	f.register(fs)
	dir, asJSON, all, reason, session, addr, auditLog := &f.store, &f.json, &f.all, &f.reason, &f.session, &f.addr, &f.auditLog
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if *dir == "" {
		*dir = approvals.DefaultDir()
	}
	store, err := openApprovalStore(*dir)
	if err != nil {
		return fail(e, err)
	}
	switch sub {
	case "list":
		states := []string{approvals.Pending}
		if *all {
			states = nil
		}
		items, err := store.List(states...)
		if err != nil {
			return fail(e, err)
		}
		if *asJSON {
			return printJSON(e, items)
		}
		if len(items) == 0 {
			fmt.Fprintln(e.stdout, "no requests")
		}
		for _, it := range items {
			fmt.Fprintf(e.stdout, "%s  %-8s  %s %s  (%s, agent %s, %s)\n", it.ID, it.State, termsafe.Line(it.Tool), oneLine(string(it.Args)), termsafe.Line(it.Class), termsafe.Line(it.Agent), termsafe.Line(it.Rule))
		}
		return 0
	case "show":
		if len(operands) != 1 {
			return fail(e, fmt.Errorf("approvals show: name one request"))
		}
		it, err := store.Get(operands[0])
		if err != nil {
			return fail(e, err)
		}
		if *asJSON {
			return printJSON(e, it)
		}
		showRequest(e, it)
		return 0
	case "approve", "deny":
		if len(operands) != 1 {
			return fail(e, fmt.Errorf("approvals %s: name one request", sub))
		}
		scope := approvals.ScopeCall
		if *session {
			scope = approvals.ScopeSession
		}
		if sub == "deny" && *session {
			return fail(e, fmt.Errorf("approvals deny: --session is for approvals"))
		}
		// The command line decides in the name of the user running it.
		by, err := loginName()
		if err != nil {
			return fail(e, fmt.Errorf("approvals %s: %w (nothing was decided)", sub, err))
		}
		al, err := openAudit(e, *auditLog, nil)
		if err != nil {
			return fail(e, fmt.Errorf("audit log: %w (nothing was decided)", err))
		}
		it, err := store.DecideRecorded(al.log, operands[0], sub == "approve", by, *reason, scope)
		if err != nil {
			return fail(e, err)
		}
		fmt.Fprintf(e.stdout, "%s %s (%s) by %s\n", it.State, it.ID, it.Tool, it.By)
		return 0
	case "serve":
		cfg, err := config.Load()
		if err != nil {
			return fail(e, err)
		}
		if len(cfg.Approvers) == 0 {
			return fail(e, fmt.Errorf("approvals serve: no approver may sign in: the configuration (%s) names none. For each person who decides, make a token with cordon serve token, add their name and its sha256 under approvers there, and give them the token", config.Path()))
		}
		al, err := openAudit(e, *auditLog, nil)
		if err != nil {
			return fail(e, fmt.Errorf("audit log: %w", err))
		}
		return serveApprovals(e, store, al.log, *addr, cfg.Approvers)
	}
	return fail(e, fmt.Errorf("approvals: unknown subcommand %q (list, show, approve, deny, serve)", sub))
}

// approvalsFlags are the flags of cordon approvals' subcommands, one set
// for all of them.
type approvalsFlags struct {
	store, reason, addr, auditLog string
	json, all, session            bool
}

func (f *approvalsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "store", "", "the approval store: a `DIR`, cordon serve's SQLite database (STATE/serve/db/cordon.db) or a postgres:// URL (default: $CORDON_STATE_DIR/approvals or ~/.local/state/cordon/approvals)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.BoolVar(&f.all, "all", false, "list: every request, decided ones too")
	fs.StringVar(&f.reason, "reason", "", "approve, deny: why")
	fs.BoolVar(&f.session, "session", false, "approve: also identical calls for the rest of the agent's session")
	fs.StringVar(&f.addr, "http", "127.0.0.1:0", "serve: listen on `ADDR` (loopback)")
	fs.StringVar(&f.auditLog, "audit-log", "", "record decisions in `FILE` (default: the configuration's)")
}

func printJSON(e *env, v any) int {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(e.stdout, string(b))
	return 0
}

func showRequest(e *env, it approvals.Item) {
	w := e.stdout
	fmt.Fprintf(w, "request %s: %s\n", it.ID, it.State)
	// What the agent and its tools chose is shown whole and escaped: an
	// approver decides on exactly these bytes.
	// Indented, one field a line: a held command's stdin or an upload's
	// content shows its size, SHA-256 and beginning on lines of their own.
	args := string(it.Args)
	var indented bytes.Buffer
	if json.Indent(&indented, it.Args, "           ", "  ") == nil {
		args = indented.String()
	}
	fmt.Fprintf(w, "call:      %s %s\n", termsafe.Line(it.Tool), termsafe.Text(args))
	for _, a := range slices.Sorted(maps.Keys(it.Files)) {
		fmt.Fprintf(w, "file:      %s: %s\n", termsafe.Line(a), termsafe.Line(it.Files[a].Describe()))
	}
	fmt.Fprintf(w, "class:     %s (can be undone: %v)\n", termsafe.Line(it.Class), it.Reversible)
	fmt.Fprintf(w, "asked by:  %s: %s\n", termsafe.Line(it.Rule), termsafe.Line(it.Reason))
	fmt.Fprintf(w, "agent:     %s, profile %s (sha256 %.16s), session %s\n", termsafe.Line(it.Agent), termsafe.Line(it.Profile), termsafe.Line(it.ProfileHash), termsafe.Line(it.Session))
	labels := "none"
	if len(it.Labels) > 0 {
		labels = strings.Join(it.Labels, ", ")
	}
	fmt.Fprintf(w, "labels:    %s\n", termsafe.Line(labels))
	fmt.Fprintf(w, "created:   %s, expires %s\n", it.Created.Format(time.RFC3339), it.Expires.Format(time.RFC3339))
	if len(it.Recent) > 0 {
		fmt.Fprintln(w, "before it:")
		for _, r := range it.Recent {
			verdict := "allowed"
			switch {
			case r.Held:
				verdict = "held"
			case !r.Allow:
				verdict = "refused"
			}
			fmt.Fprintf(w, "  %3d  %-7s  %s\n", r.Step, verdict, termsafe.Line(r.Call))
		}
	}
	if it.By != "" {
		fmt.Fprintf(w, "decided:   by %s (%s): %s\n", termsafe.Line(it.By), it.Scope, termsafe.Line(it.Why))
	}
	if it.Result != "" {
		fmt.Fprintf(w, "result:    %s\n", termsafe.Text(it.Result))
	}
}

// serveApprovals serves the queue on loopback: a page listing the pending
// requests with their context and approve and deny buttons, and a JSON
// API, to the approvers, each signed in with a token of their own.
func serveApprovals(e *env, store *approvals.Store, log *audit.Log, addr string, approvers []config.Token) int {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "::1" && host != "localhost") {
		return fail(e, fmt.Errorf("--http %s: listen on a loopback address (127.0.0.1:PORT)", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(e, fmt.Errorf("--http: %w", err))
	}
	fmt.Fprintf(e.stdout, "cordon: approvals on http://%s/ (sign in with your approver token)\n", ln.Addr())
	srv := &http.Server{Handler: approvalsHandler(store, log, newApproverAuth(approvers, ln.Addr().String())), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(e, err)
	}
	return 0
}

// approvalsHandler serves the page (to signed-in browsers) and the API (to
// requests with an approver's bearer token); every decision is taken in
// the name of the approver's token.
func approvalsHandler(store *approvals.Store, log *audit.Log, a *approverAuth) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		loginPage().Execute(w, map[string]any{"Note": r.URL.Query().Get("note")})
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<12)
		if !a.sameOrigin(r) {
			http.Error(w, "cordon: a form posted from another origin is refused", http.StatusForbidden)
			return
		}
		if !a.signIn(w, r.PostFormValue("token")) {
			w.WriteHeader(http.StatusUnauthorized)
			loginPage().Execute(w, map[string]any{"Note": "That token is no approver's."})
			return
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if a.form(w, r) == nil {
			return
		}
		a.signOut(w, r)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		s := a.session(r)
		if s == nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		all, err := store.List()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var items, recent []approvals.Item
		for _, it := range all {
			if it.State == approvals.Pending {
				items = append(items, it)
			} else {
				recent = append(recent, it)
			}
		}
		if len(recent) > 10 {
			recent = recent[len(recent)-10:]
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		page().Execute(w, map[string]any{"Pending": items, "Recent": recent, "Name": s.name, "CSRF": s.csrf, "Note": r.URL.Query().Get("note")})
	})
	mux.HandleFunc("POST /decide", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
		s := a.form(w, r)
		if s == nil {
			return
		}
		scope := approvals.ScopeCall
		if r.PostFormValue("scope") == approvals.ScopeSession {
			scope = approvals.ScopeSession
		}
		it, err := store.DecideRecorded(log, r.PostFormValue("id"), r.PostFormValue("decision") == "approve", s.name, r.PostFormValue("reason"), scope)
		note := fmt.Sprintf("%s %s (%s) by %s", it.State, it.ID, it.Tool, it.By)
		if err != nil {
			note = "not decided: " + err.Error()
		}
		http.Redirect(w, r, "/?note="+url.QueryEscape(note), http.StatusSeeOther)
	})
	mux.HandleFunc("GET /api/approvals", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := a.bearer(r); !ok {
			http.Error(w, "an approver's token is needed (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		states := []string{approvals.Pending}
		if r.URL.Query().Get("all") != "" {
			states = nil
		}
		items, err := store.List(states...)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(items)
	})
	mux.HandleFunc("POST /api/approvals/{id}/{decision}", func(w http.ResponseWriter, r *http.Request) {
		by, ok := a.bearer(r)
		if !ok {
			http.Error(w, "an approver's token is needed (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		var body struct{ By, Reason, Scope string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
			http.Error(w, "want a JSON body: {\"reason\": WHY, \"scope\": \"call\"|\"session\"}", http.StatusBadRequest)
			return
		}
		if body.By != "" {
			http.Error(w, fmt.Sprintf("by: the decision is taken in the name of your token (%s); leave by out", by), http.StatusBadRequest)
			return
		}
		d := r.PathValue("decision")
		if d != "approve" && d != "deny" {
			http.Error(w, "approve or deny", http.StatusNotFound)
			return
		}
		it, err := store.DecideRecorded(log, r.PathValue("id"), d == "approve", by, body.Reason, body.Scope)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(it)
	})
	return mux
}

// The pages are parsed when first served: most cordon processes serve none.
var loginPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cordon: approvals, sign in</title>
<style>body { font-family: system-ui, sans-serif; margin: 2em; max-width: 40em; } .note { background: #eef; padding: .5em; }</style>
</head><body>
<h1>Sign in to decide held tool calls</h1>
{{with .Note}}<p class="note" id="note">{{.}}</p>{{end}}
<form method="post" action="/login">
<label>Your approver token <input name="token" type="password" autocomplete="off" required></label>
<button>Sign in</button>
</form>
<p>Decisions are taken in the name your token has in cordon's configuration.</p>
</body></html>
`))
})

var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		// Every text an agent, a tool server or a profile chose is
		// shown escaped: a control or bidirectional character cannot
		// reorder or hide what an approver reads (html/template escapes
		// HTML, not these).
		"json": func(b json.RawMessage) string {
			var v any
			if json.Unmarshal(b, &v) != nil {
				return termsafe.Line(string(b))
			}
			out, _ := json.MarshalIndent(v, "", "  ")
			return string(termsafe.JSON(out))
		},
		"t":    termsafe.Line,
		"when": func(t time.Time) string { return t.Local().Format("15:04:05 Jan 2") },
	}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cordon: approvals</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 60em; }
.req { border: 1px solid #999; border-radius: 6px; padding: 1em; margin: 1em 0; }
pre { background: #f4f4f4; padding: .5em; overflow-x: auto; }
.irrev { color: #a00; font-weight: bold; }
.note { background: #eef; padding: .5em; }
table { border-collapse: collapse; } td { padding: .1em .6em; }
</style></head><body>
<h1>Tool calls waiting for approval</h1>
<form method="post" action="/logout"><input type="hidden" name="csrf" value="{{.CSRF}}">Signed in as <b id="approver">{{.Name}}</b>. <button>Sign out</button></form>
{{with .Note}}<p class="note" id="note">{{.}}</p>{{end}}
{{if not .Pending}}<p id="empty">Nothing is waiting.</p>{{end}}
{{range .Pending}}
<div class="req" id="req-{{.ID}}">
<h2>{{t .Tool}} <small>request {{.ID}}</small></h2>
<p>Agent <b>{{t .Agent}}</b>, profile {{t .Profile}}, session {{t .Session}}.
Class <b>{{t .Class}}</b>{{if not .Reversible}}: <span class="irrev">cannot be undone</span>{{end}}.</p>
<p>Asked for by <code>{{t .Rule}}</code>: {{t .Reason}}.</p>
<p>Arguments:</p><pre>{{json .Args}}</pre>
{{if .Files}}<p>Files, as decided (the call is refused if a path names another file when it runs):</p><ul>{{range $a, $f := .Files}}<li><code>{{t $a}}</code>: {{t $f.Describe}}</li>{{end}}</ul>{{end}}
<p>The session carries: {{if .Labels}}{{range .Labels}}<code>{{t .}}</code> {{end}}{{else}}no labels{{end}}.</p>
{{if .Recent}}<p>What the agent did before:</p><table>
{{range .Recent}}<tr><td>{{.Step}}</td><td>{{if .Held}}held{{else if .Allow}}allowed{{else}}refused{{end}}</td><td><code>{{t .Call}}</code></td></tr>{{end}}
</table>{{end}}
<p>Expires {{when .Expires}}.</p>
<form method="post" action="/decide">
<input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="id" value="{{.ID}}">
<label>Reason <input name="reason"></label>
<label><input type="checkbox" name="scope" value="session"> also identical calls in this session</label>
<button name="decision" value="approve">Approve</button>
<button name="decision" value="deny">Deny</button>
</form>
</div>
{{end}}
{{if .Recent}}<h2>Decided</h2><table>
{{range .Recent}}<tr><td>{{.ID}}</td><td>{{t .Tool}}</td><td>{{.State}}</td><td>{{t .By}}</td><td>{{t .Why}}</td></tr>{{end}}
</table>{{end}}
</body></html>
`))
})

// oneLine shows text an agent or a tool server chose on one line: spaces
// collapsed, cut at 200 bytes, control characters escaped.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return termsafe.Line(s)
}
