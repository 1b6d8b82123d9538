package sdk_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
)

// endlessLineServer answers a watch with 200 and then one line that never
// ends: total bytes of 'a', no newline, written in 64 KiB parts. A real
// cordon serve never sends a line over ~64 KiB (maxEventLine); a client
// that keeps reading one far past that keeps it all in memory. It counts
// what the client took; a write that the client does not take within 5 s
// (it stopped reading) or that fails (it hung up) ends the answer.
func endlessLineServer(t *testing.T, total int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var sent atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/sb-ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"sb-ok","agent":"a","state":"running"}`))
	})
	mux.HandleFunc("GET /v1/sandboxes/sb-ok/files/watch", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		part := []byte(strings.Repeat("a", 64<<10))
		for sent.Load() < total {
			rc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := w.Write(part); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			sent.Add(int64(len(part)))
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &sent
}

const (
	// endlessTotal is what the hostile server offers; sane is well past
	// any line a cordon serve sends and past the socket buffers: a client
	// that took more than that was still reading one line.
	endlessTotal = 48 << 20
	endlessSane  = 8 << 20
)

// Control: the Go client bounds a line (1 MiB) and gives up.
func TestAttack_WatchEndlessLineGoClientHolds(t *testing.T) {
	srv, sent := endlessLineServer(t, endlessTotal)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(srv.URL, "t")
	w, err := c.WatchDir(ctx, "sb-ok", "/d", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Next()
	w.Close()
	if err == nil {
		t.Fatal("an endless line was taken as an event")
	}
	time.Sleep(200 * time.Millisecond)
	if n := sent.Load(); n > endlessSane {
		t.Errorf("the Go client took %d MiB of one line", n>>20)
	}
}

// The Python SDK's WatchHandle bounds a line too: a hostile (or
// compromised, or man-in-the-middled) server's line that never ends would
// otherwise be kept whole in the client's memory, as long as it is sent.
func TestAttack_WatchEndlessLinePython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	srv, sent := endlessLineServer(t, endlessTotal)
	script := `
import resource, sys
from cordon import RetryPolicy, Sandbox
sb = Sandbox.connect("sb-ok", url=sys.argv[1], token="t", retry=RetryPolicy(max_retries=0))
w = sb.files.watch_dir("/d")
events = list(w)
print("events", len(events), "end_reason", w.end_reason, "maxrss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-c", script, srv.URL)
	cmd.Env = append(os.Environ(), "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("python: %s (err %v)", strings.TrimSpace(string(out)), err)
	if n := sent.Load(); n > endlessSane {
		t.Errorf("the Python WatchHandle took %d MiB of a single line without giving up (a server's line is at most ~64 KiB; the Go client stops at 1 MiB): a hostile server grows the client's memory without bound", n>>20)
	}
}

// The TypeScript SDK's WatchHandle bounds a line (jsonLines' maxLine),
// and searches each part once for a newline (not the whole line again at
// each part: quadratic time).
func TestAttack_WatchEndlessLineTypeScript(t *testing.T) {
	srv, sent := endlessLineServer(t, endlessTotal)
	runSDKScript(t, srv.URL, `
let n = 0;
const w = await sb.files.watchDir("/d", () => n++);
const t0 = Date.now();
const reason = await w.wait();
console.log("events", n, "end_reason", reason, "rss_mib", Math.round(process.memoryUsage().rss / 1048576), "ms", Date.now() - t0);
`)
	if n := sent.Load(); n > endlessSane {
		t.Errorf("the TypeScript WatchHandle took %d MiB of a single line without giving up (a server's line is at most ~64 KiB; the Go client stops at 1 MiB): a hostile server grows the client's memory without bound", n>>20)
	}
}

// runSDKScript runs body with node, after a preamble that imports the
// TypeScript SDK and connects to sandbox sb-ok of the server at url as
// sb; it returns what node printed (skipping when there is no node).
func runSDKScript(t *testing.T, url, body string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	sdkPath, err := filepath.Abs(filepath.Join("typescript", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	script := `
import { pathToFileURL } from "node:url";
const [url, sdkPath] = process.argv.slice(1);
const { Sandbox } = await import(pathToFileURL(sdkPath).href);
const sb = await Sandbox.connect("sb-ok", { url, token: "t", retry: { maxRetries: 0 } });
` + body
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append(flags, "--input-type=module", "-e", script, url, sdkPath)
	out, err := exec.CommandContext(ctx, "node", args...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	t.Logf("node: %s (err %v)", text, err)
	return text
}
