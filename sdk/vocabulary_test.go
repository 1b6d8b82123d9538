// Package sdk_test checks that cordon's three SDKs (the Go client, Python
// and TypeScript) speak one vocabulary: sdk/vocabulary.json, tabled in
// docs/SDK.md. The same fake server answers each of them with every
// refusal the API has, every kind of outcome and a directory listing; what
// each SDK makes of them (error types and their bases, fields, exit
// codes, entries, defaults, the retry policy) must be what the vocabulary
// says, the same in all three.
package sdk_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/cordon-sandbox/cordon/client"
)

type vocabulary struct {
	Defaults struct {
		URL            string  `json:"url"`
		MaxRetries     int     `json:"max_retries"`
		MaxWaitSeconds float64 `json:"max_wait_seconds"`
	} `json:"defaults"`
	Errors []struct {
		Name       string   `json:"name"`
		Base       string   `json:"base"`
		HTTPStatus int      `json:"http_status"`
		Fields     []string `json:"fields"`
	} `json:"errors"`
	LimitStatuses []string `json:"limit_statuses"`
	Types         map[string]struct {
		Fields  []string `json:"fields"`
		Methods []string `json:"methods"`
		Static  []string `json:"static"`
	} `json:"types"`
	Durations []string          `json:"durations"`
	GoNames   map[string]string `json:"go_names"`
}

func loadVocabulary(t *testing.T) *vocabulary {
	t.Helper()
	b, err := os.ReadFile("vocabulary.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vocabulary
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("vocabulary.json: %v", err)
	}
	return &v
}

// The statuses the probes ask for, and the exec cases.
var (
	statuses  = []int{400, 401, 403, 404, 409, 410, 413, 423, 429, 500, 503}
	execCases = func(v *vocabulary) []string {
		return append([]string{"ok", "exit_nonzero", "signaled", "gone"}, v.LimitStatuses...)
	}
)

// exitCodes are the exit codes the fake server gives each limit (README,
// "Exit statuses"); limits are those its outcomes name (the others name
// none, and are still limits by their status).
var (
	exitCodes = map[string]int{"timeout": 124, "output_limit": 123, "pids_limit": 122, "memory_limit": 121, "cpu_time_limit": 120,
		"file_size_limit": 119, "egress_budget": 118, "egress_denied": 116, "workspace_size_limit": 115, "workspace_inodes_limit": 114, "cache_size_limit": 113}
	limits = map[string]map[string]any{"timeout": {"name": "timeout", "value": "1s"}, "memory_limit": {"name": "memory", "value": "64MiB"}}
)

// fakeServer answers as cordon serve would: GET /v1/sandboxes/sb-NNN
// with status NNN, sb-ok as a running sandbox whose exec answers the case
// its argv names.
func fakeServer(t *testing.T, creates *createLog) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("create: %v", err)
		}
		creates.add(body)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"sb-ok","agent":"a","state":"running"}`))
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"id":"sb-ok","state":"running"},{"id":"sb-2","state":"ended"}]`))
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if id == "sb-ok" {
			w.Write([]byte(`{"id":"sb-ok","agent":"a","state":"running"}`))
			return
		}
		status, err := strconv.Atoi(strings.TrimPrefix(id, "sb-"))
		if err != nil {
			http.Error(w, "no such sandbox", http.StatusNotFound)
			return
		}
		body := map[string]string{"error": fmt.Sprintf("refused %d", status), "sandbox": "sb-named"}
		if status == http.StatusLocked {
			body["approval"] = "ap-1"
		}
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	})
	var waits atomic.Int32
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/commands", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"id":"cmd-1","args":["bg"],"started":"2026-01-02T03:04:05Z","state":"running"}]`))
	})
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/commands/cmd-1", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "1" {
			t.Errorf("waiting for a background command: %s", r.URL.RawQuery)
		}
		// A wait given up once (a proxy's timeout), then the result.
		if waits.Add(1)%2 == 1 {
			w.Write([]byte(`{"id":"cmd-1","args":["bg"],"started":"2026-01-02T03:04:05Z","state":"running"}`))
			return
		}
		w.Write([]byte(`{"stdout":"Ymcgb3V0Cg==","stdout_text":"bg out\n","stderr":"","outcome":{"status":"exit_nonzero","exit_code":3,"command_exit_code":3,"message":"exited 3"}}`))
	})
	mux.HandleFunc("POST /v1/sandboxes/sb-ok/commands/cmd-1/kill", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"id":"cmd-1","args":["bg"],"started":"2026-01-02T03:04:05Z","state":"ended"}`))
	})
	mux.HandleFunc("POST /v1/sandboxes/sb-ok/exec", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Args       []string
			Background bool
			Stream     bool
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Args) != 1 {
			t.Errorf("exec: %v %v", err, req.Args)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if req.Background {
			if req.Stream || req.Args[0] != "bg" {
				t.Errorf("a background exec: %+v", req)
			}
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"id":"cmd-1","args":["bg"],"started":"2026-01-02T03:04:05Z","state":"running"}`))
			return
		}
		c := req.Args[0]
		enc := json.NewEncoder(w)
		enc.Encode(map[string]any{"stdout": base64.StdEncoding.EncodeToString([]byte("out\n")), "stdout_text": "out\n"})
		enc.Encode(map[string]any{"stderr": base64.StdEncoding.EncodeToString([]byte("err\n"))})
		o := map[string]any{"status": c, "message": "ended with " + c}
		switch c {
		case "gone":
			enc.Encode(map[string]any{"error": "sandbox sb-ok has ended (memory)", "http_status": 410})
			return
		case "ok":
			o["exit_code"], o["command_exit_code"] = 0, 0
		case "exit_nonzero":
			o["exit_code"], o["command_exit_code"] = 3, 3
		case "signaled":
			o["exit_code"], o["signal"] = 137, "SIGKILL"
		default:
			o["exit_code"] = exitCodes[c]
			if l := limits[c]; l != nil {
				o["limit"] = l
			}
		}
		enc.Encode(map[string]any{"outcome": o})
	})
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/files/list", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"path":"/d","truncated":false,"entries":[` +
			`{"name":"a.txt","type":"file","size":3,"mode":"0640","modified":"2026-01-02T03:04:05.123456789Z"},` +
			`{"name":"l","type":"symlink","target":"a.txt","size":5,"mode":"0777","modified":"2026-01-02T03:04:06Z"}]}`))
	})
	// The operations on names: each answers only the request the API
	// defines, else 400.
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/files/stat", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/d/a.txt" {
			http.Error(w, `{"error":"no such file"}`, http.StatusNotFound)
			return
		}
		w.Write([]byte(`{"path":"/d/a.txt","name":"a.txt","type":"file","size":3,"mode":"0640","modified":"2026-01-02T03:04:05Z"}`))
	})
	fileOp := func(want map[string]string, answer string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			for k, v := range want {
				if q.Get(k) != v {
					t.Errorf("%s %s: %s is %q, want %q", r.Method, r.URL.Path, k, q.Get(k), v)
					http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
					return
				}
			}
			w.Write([]byte(answer))
		}
	}
	mux.HandleFunc("DELETE /v1/sandboxes/sb-ok/files", fileOp(map[string]string{"path": "/d/old", "recursive": "1"}, `{"path":"/d/old"}`))
	mux.HandleFunc("POST /v1/sandboxes/sb-ok/files/rename", fileOp(map[string]string{"path": "/d/a.txt", "to": "/d/b.txt"}, `{"path":"/d/b.txt","from":"/d/a.txt"}`))
	mux.HandleFunc("POST /v1/sandboxes/sb-ok/files/mkdir", fileOp(map[string]string{"path": "/d/new"}, `{"path":"/d/new","created":true}`))
	// Tar: /d whole; /cut cut short where a naive check would be fooled
	// (after a member's header and two zero blocks of its content), the
	// trailer saying so as the server does.
	whole, cut := tarFixtures(t)
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/files/tar", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Cordon-Tar-Error")
		switch r.URL.Query().Get("path") {
		case "/d":
			w.Write(whole)
		case "/cut":
			w.Write(cut)
			w.Header().Set("Cordon-Tar-Error", "the sandbox ended")
		default:
			http.Error(w, `{"error":"no such directory"}`, http.StatusNotFound)
		}
	})
	mux.HandleFunc("PUT /v1/sandboxes/sb-ok/files/tar", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("path") != "/d" || !bytes.Equal(b, whole) || r.Header.Get("Content-Type") != "application/x-tar" {
			t.Errorf("tar upload: %s, %d bytes, %s", r.URL.RawQuery, len(b), r.Header.Get("Content-Type"))
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"path":"/d","entries":2,"bytes":2051,"archive_bytes":%d}`, len(b))
	})
	// A watch of /d, recursive: its changes, then the server's end.
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/files/watch", func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Get("path") != "/d" || q.Get("recursive") != "1" {
			t.Errorf("watch: %s", r.URL.RawQuery)
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(watchLines))
	})
	mux.HandleFunc("POST /v1/sandboxes/sb-ok/port-urls", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		d, err := time.ParseDuration(fmt.Sprint(body["expires_in"]))
		if body["port"] != 8080.0 || err != nil || d != 5*time.Minute || len(body) != 2 {
			t.Errorf("port-urls: %v", body)
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"path":"/v1/p/CAP/","expires":"2026-01-02T03:09:05Z"}`))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the fake server was asked %s %s", r.Method, r.URL)
		http.Error(w, "no such route", http.StatusNotFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// tarFixtures are a whole archive (a.txt, and zeros.bin of 2048 zero
// bytes) and the same cut after zeros.bin's header and 1024 bytes of it.
func tarFixtures(t *testing.T) (whole, cut []byte) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range []struct {
		name string
		data []byte
	}{{"a.txt", []byte("abc")}, {"zeros.bin", make([]byte, 2048)}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	whole = b.Bytes()
	// a.txt: header and one block; zeros.bin: header, then two of its four
	// blocks.
	return whole, whole[:512+512+512+1024]
}

// createLog keeps the bodies of the creates the fake server was sent.
type createLog struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (l *createLog) add(b map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bodies = append(l.bodies, b)
}

// take returns the bodies sent since the last take.
func (l *createLog) take() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bodies
	l.bodies = nil
	return b
}

// TestVocabulary runs the three SDKs against the fake server and checks
// what each makes of it.
func TestVocabulary(t *testing.T) {
	v := loadVocabulary(t)
	creates := &createLog{}
	srv := fakeServer(t, creates)
	cases := strings.Join(execCases(v), "\n")
	docs := map[string]map[string]any{"go": goProbe(t, v, srv.URL, execCases(v))}
	sent := map[string][]map[string]any{"go": creates.take()}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Log("python3 is not installed: the Python SDK is not compared")
	} else {
		cmd := exec.Command("python3", "testdata/probe.py", srv.URL)
		cmd.Env = append(os.Environ(), "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")
		docs["python"] = runProbe(t, cmd, cases)
		sent["python"] = creates.take()
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Log("node is not installed: the TypeScript SDK is not compared")
	} else {
		docs["typescript"] = runProbe(t, exec.Command("node", "testdata/probe.mjs", srv.URL, filepath.Join("typescript", "index.js")), cases)
		sent["typescript"] = creates.take()
	}
	// Each created one sandbox with an agent, an environment and a
	// timeout of 90s, and sent the same request.
	for lang, bodies := range sent {
		if len(bodies) != 1 {
			t.Errorf("%s sent %d creates, want 1", lang, len(bodies))
			continue
		}
		b := bodies[0]
		d, err := time.ParseDuration(fmt.Sprint(b["timeout"]))
		if b["agent"] != "a" || fmt.Sprint(b["env"]) != "map[A:1]" || err != nil || d != 90*time.Second || len(b) != 3 {
			t.Errorf("%s created a sandbox with %v, want agent a, env A=1 and a timeout of 90s", lang, b)
		}
	}
	for lang, doc := range docs {
		t.Run(lang, func(t *testing.T) { checkDoc(t, v, lang, srv.URL, normalize(v, lang, doc)) })
	}
}

func runProbe(t *testing.T, cmd *exec.Cmd, stdin string) map[string]any {
	t.Helper()
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s printed %q: %v", strings.Join(cmd.Args, " "), out, err)
	}
	return doc
}

// goProbe is what the Go client makes of the fake server, in the probes'
// shape.
func goProbe(t *testing.T, v *vocabulary, url string, cases []string) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("CORDON_URL", "")
	def := client.New("", "t")
	c := client.New(url, "t")
	c.Retry = client.RetryPolicy{}
	doc := map[string]any{
		"defaults": map[string]any{"url": client.DefaultURL, "max_retries": def.Retry.MaxRetries, "max_wait": def.Retry.MaxWait},
	}
	if u := reflect.ValueOf(def).Elem().FieldByName("base").String(); u != client.DefaultURL {
		t.Errorf("client.New(\"\", ...) talks to %q, want %q", u, client.DefaultURL)
	}
	run := func(fn func() (any, error)) map[string]any {
		r, err := fn()
		if err != nil {
			return map[string]any{"error": goError(t, err)}
		}
		return map[string]any{"result": r}
	}
	errs := map[string]any{}
	for _, st := range statuses {
		errs[strconv.Itoa(st)] = run(func() (any, error) {
			return c.ConnectSandbox(fmt.Sprintf("sb-%d", st)).GetInfo(ctx)
		})
	}
	doc["errors"] = errs
	sb := c.ConnectSandbox("sb-ok")
	ex := map[string]any{}
	for _, name := range cases {
		ex[name] = run(func() (any, error) {
			r, err := sb.Commands.RunArgs(ctx, []string{name}, nil)
			if err != nil {
				return nil, err
			}
			return map[string]any{"fields": goFields(reflect.TypeOf(*r)), "status": r.Status, "exit_code": r.ExitCode, "stdout": r.Stdout, "stderr": r.Stderr}, nil
		})
	}
	doc["exec"] = ex
	entries, err := sb.Files.List(ctx, "/d")
	if err != nil || len(entries) == 0 {
		t.Fatalf("Files.List: %v, %d entries", err, len(entries))
	}
	var es []any
	for _, e := range entries {
		es = append(es, map[string]any{"name": e.Name, "path": e.Path, "type": e.Type, "size": e.Size, "mode": e.Mode,
			"modified_time": e.ModifiedTime.UTC().Format("2006-01-02T15:04:05Z"), "symlink_target": e.SymlinkTarget})
	}
	doc["entries"] = es
	if _, err := c.CreateSandboxWith(ctx, client.CreateOptions{Agent: "a", Env: map[string]string{"A": "1"}, Timeout: 90 * time.Second}); err != nil {
		t.Fatalf("CreateSandboxWith: %v", err)
	}
	info, err := sb.Files.GetInfo(ctx, "/d/a.txt")
	if err != nil {
		t.Fatalf("Files.GetInfo: %v", err)
	}
	ops := map[string]any{"info": map[string]any{"name": info.Name, "path": info.Path, "type": info.Type, "size": info.Size, "mode": info.Mode,
		"modified_time": info.ModifiedTime.UTC().Format("2006-01-02T15:04:05Z"), "symlink_target": info.SymlinkTarget}}
	ops["exists"], err = sb.Files.Exists(ctx, "/d/a.txt")
	ops["missing"], _ = sb.Files.Exists(ctx, "/d/missing")
	ops["made"], err = sb.Files.MakeDir(ctx, "/d/new")
	ops["removed"] = fmt.Sprint(sb.Files.Remove(ctx, "/d/old"))
	ops["renamed"] = fmt.Sprint(sb.Files.Rename(ctx, "/d/a.txt", "/d/b.txt"))
	var tb bytes.Buffer
	if _, err := sb.Files.ReadTar(ctx, "/d", &tb); err != nil {
		t.Errorf("ReadTar: %v", err)
	}
	ops["tar_sha256"] = fmt.Sprintf("%x", sha256.Sum256(tb.Bytes()))
	_, err = sb.Files.ReadTar(ctx, "/cut", io.Discard)
	ops["tar_cut"] = err != nil
	res, err := sb.Files.WriteTar(ctx, "/d", bytes.NewReader(tb.Bytes()))
	ops["tar_entries"] = res.Entries
	if err != nil {
		t.Errorf("WriteTar: %v", err)
	}
	h, err := sb.Commands.StartArgs(ctx, []string{"bg"}, nil)
	if err != nil {
		t.Fatalf("StartArgs: %v", err)
	}
	r, err := h.Wait(ctx)
	var ce *client.CommandExitError
	ops["bg"] = map[string]any{"id": h.ID, "wait_error": errors.As(err, &ce), "exit_code": r.ExitCode, "stdout": r.Stdout, "kill": fmt.Sprint(h.Kill(ctx))}
	listed, _ := sb.Commands.List(ctx)
	ops["bg_listed"] = len(listed)
	ops["port_url"], err = sb.PortURL(ctx, 8080, 5*time.Minute)
	if err != nil {
		t.Errorf("PortURL: %v", err)
	}
	watch, err := sb.Files.WatchDir(ctx, "/d", true)
	if err != nil {
		t.Fatalf("WatchDir: %v", err)
	}
	var events []any
	for {
		e, err := watch.Next()
		if err != nil {
			break
		}
		events = append(events, []any{e.Type, e.Name, e.IsDir})
	}
	ops["watch"] = map[string]any{"events": events, "end_reason": watch.EndReason}
	doc["files"] = ops
	sbMembers := append(goFields(reflect.TypeOf(*sb)), goMethods(reflect.TypeOf(sb))...)
	for _, static := range []string{"create", "connect", "list"} {
		name, ok := strings.CutPrefix(v.GoNames["Sandbox."+static], "Client.")
		if !ok {
			t.Fatalf("go_names has no Client method for Sandbox.%s", static)
		}
		if _, ok := reflect.TypeOf(c).MethodByName(name); ok {
			sbMembers = append(sbMembers, static)
		}
	}
	doc["members"] = map[string]any{
		"Sandbox":         sbMembers,
		"Commands":        goMethods(reflect.TypeOf(sb.Commands)),
		"Files":           goMethods(reflect.TypeOf(sb.Files)),
		"EntryInfo":       goFields(reflect.TypeOf(entries[0])),
		"RetryPolicy":     goFields(reflect.TypeOf(client.RetryPolicy{})),
		"Terminal":        goMethods(reflect.TypeOf(&client.Terminal{})),
		"WatchHandle":     append(goFields(reflect.TypeOf(client.WatchHandle{})), goMethods(reflect.TypeOf(&client.WatchHandle{}))...),
		"FilesystemEvent": goFields(reflect.TypeOf(client.FilesystemEvent{})),
		"CommandHandle":   append(goFields(reflect.TypeOf(client.CommandHandle{})), goMethods(reflect.TypeOf(&client.CommandHandle{}))...),
	}
	list, err := c.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []any
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	doc["listed"] = ids
	var told []any
	rc := client.New(url, "t")
	rc.Retry = client.RetryPolicy{MaxRetries: 2, MaxWait: 30 * time.Second, OnRetry: func(attempt int, wait time.Duration, err error) {
		told = append(told, []any{attempt, wait, goTypeName(err)})
	}}
	_, err = rc.ConnectSandbox("sb-429").GetInfo(ctx)
	var rl *client.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("sb-429 with retries: %v", err)
	}
	doc["retry"] = map[string]any{"told": told, "error": goTypeName(err), "retry_after": rl.RetryAfter}
	// Through JSON, so that values compare as the probes' do.
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func goTypeName(err error) string {
	return strings.TrimPrefix(reflect.TypeOf(err).String(), "*client.")
}

// goError is an error of the Go client in the probes' shape: its type, the
// types it unwraps to, and its fields and methods' values.
func goError(t *testing.T, err error) map[string]any {
	doc := map[string]any{"class": goTypeName(err)}
	var chain []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		chain = append(chain, goTypeName(e))
	}
	doc["chain"] = chain
	rv := reflect.ValueOf(err)
	fields := goFields(rv.Elem().Type())
	for _, f := range fields {
		doc[f] = rv.Elem().FieldByName(f).Interface()
	}
	for _, m := range goMethods(rv.Type()) {
		if m == "Error" || m == "Unwrap" {
			continue
		}
		fields = append(fields, m)
		if r := rv.MethodByName(m).Call(nil); len(r) == 1 {
			doc[m] = r[0].Interface()
		}
	}
	doc["fields"] = fields
	if o, ok := doc["Outcome"].(client.Outcome); ok {
		doc["Outcome"] = map[string]any{"status": o.Status}
	}
	return doc
}

// goFields are a struct's exported fields, promoted ones included,
// embedded ones themselves not.
func goFields(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() && !f.Anonymous {
			out = append(out, f.Name)
		}
	}
	return out
}

func goMethods(t reflect.Type) []string {
	var out []string
	for i := range t.NumMethod() {
		out = append(out, t.Method(i).Name)
	}
	return out
}

// snake is a name in snake_case: keepAlive, KeepAlive and keep_alive are
// keep_alive; HTTPStatus is http_status, SandboxID sandbox_id.
func snake(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i > 0 && i+1 < len(r) && unicode.IsUpper(r[i-1]) && unicode.IsLower(r[i+1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// normalize rewrites a probe's document in the vocabulary's spelling:
// names in snake_case (Go's as go_names says), durations in seconds, and
// absent values (nil, 0, "") as nil.
func normalize(v *vocabulary, lang string, doc map[string]any) map[string]any {
	// name spells n, a member of type typ ("" for a field of an error or
	// a result), as the vocabulary does.
	memberName := func(typ, n string) string {
		if lang == "python" {
			return n
		}
		if lang == "go" && typ != "" {
			for voc, g := range v.GoNames {
				if m, ok := strings.CutPrefix(voc, typ+"."); ok && g == n {
					return m
				}
			}
		}
		s := snake(n)
		if lang == "typescript" {
			if base, ok := strings.CutSuffix(s, "_ms"); ok && slices.Contains(v.Durations, base) {
				return base
			}
		}
		return s
	}
	name := func(n string) string { return memberName("", n) }
	value := func(field string, x any) any {
		switch y := x.(type) {
		case nil:
			return nil
		case string:
			if y == "" {
				return nil
			}
		case float64:
			if y == 0 && field != "exit_code" {
				return nil
			}
			if slices.Contains(v.Durations, field) {
				switch lang {
				case "typescript":
					return y / 1000
				case "go":
					return y / 1e9
				}
			}
		}
		return x
	}
	errDoc := func(e map[string]any) map[string]any {
		out := map[string]any{"class": e["class"], "chain": e["chain"]}
		var fields []string
		for _, f := range e["fields"].([]any) {
			n := name(f.(string))
			fields = append(fields, n)
			out[n] = value(n, e[f.(string)])
		}
		slices.Sort(fields)
		out["fields"] = fields
		return out
	}
	answer := func(a any) any {
		m := a.(map[string]any)
		if e, ok := m["error"]; ok {
			return map[string]any{"error": errDoc(e.(map[string]any))}
		}
		if r, ok := m["result"].(map[string]any); ok {
			if fs, ok := r["fields"].([]any); ok {
				var names []string
				for _, f := range fs {
					names = append(names, name(f.(string)))
				}
				slices.Sort(names)
				r["fields"] = names
			}
		}
		return m
	}
	out := map[string]any{"defaults": doc["defaults"], "listed": doc["listed"]}
	d := out["defaults"].(map[string]any)
	d["max_wait"] = value("max_wait", d["max_wait"])
	for _, k := range []string{"errors", "exec"} {
		m := map[string]any{}
		for c, a := range doc[k].(map[string]any) {
			m[c] = answer(a)
		}
		out[k] = m
	}
	var entries []any
	for _, e := range doc["entries"].([]any) {
		m := map[string]any{}
		for k, x := range e.(map[string]any) {
			m[k] = value(k, x)
		}
		entries = append(entries, m)
	}
	out["entries"] = entries
	files := map[string]any{}
	for k, x := range doc["files"].(map[string]any) {
		if m, ok := x.(map[string]any); ok {
			n := map[string]any{}
			for kk, xx := range m {
				n[kk] = value(kk, xx)
			}
			x = n
		}
		files[k] = x
	}
	out["files"] = files
	members := map[string][]string{}
	for typ, ns := range doc["members"].(map[string]any) {
		for _, n := range ns.([]any) {
			members[typ] = append(members[typ], memberName(typ, n.(string)))
		}
	}
	out["members"] = members
	r := doc["retry"].(map[string]any)
	var told []any
	for _, x := range r["told"].([]any) {
		a := x.([]any)
		told = append(told, []any{a[0], value("retry_after", a[1]), a[2]})
	}
	out["retry"] = map[string]any{"told": told, "error": r["error"], "retry_after": value("retry_after", r["retry_after"])}
	return out
}

// checkDoc compares a normalized document with what the vocabulary says.
func checkDoc(t *testing.T, v *vocabulary, lang, url string, doc map[string]any) {
	byName := map[string]int{}
	for i, e := range v.Errors {
		byName[e.Name] = i
	}
	chainOf := func(name string) (chain []string, fields []string) {
		for name != "" {
			e := v.Errors[byName[name]]
			chain = append(chain, name)
			fields = append(fields, e.Fields...)
			name = e.Base
		}
		return chain, fields
	}
	goName := func(n string) string {
		if lang == "go" && v.GoNames[n] != "" {
			return v.GoNames[n]
		}
		return n
	}
	checkErr := func(what string, got any, class string, want map[string]any) {
		t.Helper()
		m, ok := got.(map[string]any)
		e, _ := m["error"].(map[string]any)
		if !ok || e == nil {
			t.Errorf("%s: %v, want a %s", what, got, class)
			return
		}
		chain, fields := chainOf(class)
		for i := range chain {
			chain[i] = goName(chain[i])
		}
		if fmt.Sprint(e["class"]) != goName(class) || fmt.Sprint(e["chain"]) != fmt.Sprint(chain) {
			t.Errorf("%s: %v (unwrapping to %v), want %s (%v)", what, e["class"], e["chain"], goName(class), chain)
		}
		have := e["fields"].([]string)
		for _, f := range fields {
			if !slices.Contains(have, f) {
				t.Errorf("%s: the %s has no %s (it has %v)", what, class, f, have)
			}
		}
		for f, w := range want {
			if f == "message" {
				if s, _ := e[f].(string); !strings.Contains(s, w.(string)) {
					t.Errorf("%s: message %q, want it to hold %q", what, s, w)
				}
				continue
			}
			if fmt.Sprint(e[f]) != fmt.Sprint(w) {
				t.Errorf("%s: %s is %v, want %v", what, f, e[f], w)
			}
		}
	}

	d := doc["defaults"].(map[string]any)
	if d["url"] != v.Defaults.URL || d["max_retries"] != float64(v.Defaults.MaxRetries) || d["max_wait"] != v.Defaults.MaxWaitSeconds {
		t.Errorf("defaults %v, want url %s, max_retries %d, max_wait %vs", d, v.Defaults.URL, v.Defaults.MaxRetries, v.Defaults.MaxWaitSeconds)
	}
	errs := doc["errors"].(map[string]any)
	for _, st := range statuses {
		class := "CordonError"
		for _, e := range v.Errors {
			if e.HTTPStatus == st {
				class = e.Name
			}
		}
		want := map[string]any{"http_status": st, "sandbox_id": "sb-named", "message": fmt.Sprintf("refused %d", st)}
		if st == http.StatusLocked {
			want["approval_id"] = "ap-1"
		}
		if st == http.StatusTooManyRequests {
			want["retry_after"] = 1
		}
		checkErr(fmt.Sprintf("answered %d", st), errs[strconv.Itoa(st)], class, want)
	}

	ex := doc["exec"].(map[string]any)
	ok, _ := ex["ok"].(map[string]any)["result"].(map[string]any)
	if ok == nil {
		t.Errorf("a command with status ok: %v", ex["ok"])
	} else {
		for _, f := range v.Types["CommandResult"].Fields {
			if !slices.Contains(ok["fields"].([]string), f) {
				t.Errorf("CommandResult has no %s (it has %v)", f, ok["fields"])
			}
		}
		if ok["status"] != "ok" || ok["exit_code"] != 0.0 || ok["stdout"] != "out\n" || ok["stderr"] != "err\n" {
			t.Errorf("a command with status ok: %v", ok)
		}
	}
	output := map[string]any{"stdout": "out\n", "stderr": "err\n", "sandbox_id": "sb-ok", "http_status": nil}
	with := func(m map[string]any) map[string]any {
		for k, x := range output {
			m[k] = x
		}
		return m
	}
	checkErr("exit_nonzero", ex["exit_nonzero"], "CommandExitError", with(map[string]any{"status": "exit_nonzero", "exit_code": 3}))
	checkErr("signaled", ex["signaled"], "CommandExitError", with(map[string]any{"status": "signaled", "exit_code": 137, "limit": nil}))
	for _, st := range v.LimitStatuses {
		want := with(map[string]any{"status": st, "exit_code": exitCodes[st]})
		if l := limits[st]; l != nil {
			want["limit"] = l
		}
		checkErr(st, ex[st], "LimitError", want)
	}
	checkErr("a stream's error line with http_status 410", ex["gone"], "SandboxEndedError", map[string]any{"http_status": 410, "sandbox_id": "sb-ok", "message": "has ended"})

	wantEntries := []any{
		map[string]any{"name": "a.txt", "path": "/d/a.txt", "type": "file", "size": 3.0, "mode": float64(0o640), "modified_time": "2026-01-02T03:04:05Z", "symlink_target": nil},
		map[string]any{"name": "l", "path": "/d/l", "type": "symlink", "size": 5.0, "mode": float64(0o777), "modified_time": "2026-01-02T03:04:06Z", "symlink_target": "a.txt"},
	}
	if !reflect.DeepEqual(doc["entries"], wantEntries) {
		t.Errorf("files.list gave\n%v\nwant\n%v", doc["entries"], wantEntries)
	}
	whole, _ := tarFixtures(t)
	wantFiles := map[string]any{"info": wantEntries[0], "exists": true, "missing": false, "made": true, "removed": "<nil>", "renamed": "<nil>", "port_url": url + "/v1/p/CAP/",
		"tar_sha256": fmt.Sprintf("%x", sha256.Sum256(whole)), "tar_cut": true, "tar_entries": 2.0,
		"bg": map[string]any{"id": "cmd-1", "wait_error": true, "exit_code": 3.0, "stdout": "bg out\n", "kill": "<nil>"}, "bg_listed": 1.0,
		"watch": map[string]any{"end_reason": "sandbox sb-ok ended", "events": []any{
			[]any{"create", "a.txt", false}, []any{"write", "a.txt", false}, []any{"create", "sub", true},
			[]any{"rename", "a.txt", false}, []any{"overflow", "", false}, []any{"remove", "", true}}}}
	if !reflect.DeepEqual(doc["files"], wantFiles) {
		t.Errorf("the operations on names gave\n%v\nwant\n%v", doc["files"], wantFiles)
	}
	members := doc["members"].(map[string][]string)
	for typ, want := range v.Types {
		if typ == "CommandResult" {
			continue // checked above, on a result
		}
		for _, n := range slices.Concat(want.Fields, want.Methods, want.Static) {
			if !slices.Contains(members[typ], n) {
				t.Errorf("%s has no %s (it has %v)", typ, n, members[typ])
			}
		}
	}
	if fmt.Sprint(doc["listed"]) != "[sb-ok sb-2]" {
		t.Errorf("Sandbox.list gave %v", doc["listed"])
	}
	r := doc["retry"].(map[string]any)
	wantTold := fmt.Sprint([]any{[]any{1.0, 1.0, goName("RateLimitError")}, []any{2.0, 1.0, goName("RateLimitError")}})
	if fmt.Sprint(r["told"]) != wantTold || r["error"] != goName("RateLimitError") || r["retry_after"] != 1.0 {
		t.Errorf("429 three times with 2 retries: on_retry told %v, then %v (retry_after %v); want told %v, then a RateLimitError (1s)", r["told"], r["error"], r["retry_after"], wantTold)
	}
}

// watchLines is the fake server's watch: each kind of change, the
// directory's own end, and the server's end line.
const watchLines = `{"type":"create","name":"a.txt"}
{"type":"write","name":"a.txt"}
{"type":"create","name":"sub","dir":true}
{"type":"rename","name":"a.txt"}
{"type":"overflow"}
{"type":"remove","dir":true}
{"type":"end","reason":"sandbox sb-ok ended"}
`
