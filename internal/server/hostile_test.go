package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/audit"
)

// realServer serves f's server through its own http.Server and listener
// (as cordon serve does) on loopback, and returns its address.
func realServer(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := f.srv.HTTPServer()
	go hs.Serve(f.srv.Listener(ln))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// from returns an HTTP client whose connections come from the loopback
// address ip (127.0.0.0/8 is all loopback), with at most conns of them.
func from(ip string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}}
}

// dialFrom opens a raw connection from ip to addr.
func dialFrom(ip, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return d.Dial("tcp", addr)
}

// serverSockets counts the descriptors of this process that are the
// server's side of a connection to port (from /proc: the sockets whose
// local port is port, other than the listener).
func serverSockets(t *testing.T, port int) int {
	t.Helper()
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			_, p, _ := strings.Cut(f[1], ":")
			if n, _ := strconv.ParseInt(p, 16, 32); int(n) == port && f[3] != "0A" { // 0A: listening
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && inodes[target] {
			n++
		}
	}
	return n
}

// logBytes is the size of every file of the audit log at path.
func logBytes(path string) int64 {
	var n int64
	for _, f := range audit.Files(path) {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestHostileClients attacks the real HTTP server from other loopback
// addresses: floods without a token and with a wrong one, huge URLs and
// headers, slowloris connections, idle kept-alive ones. The server's
// descriptors stay within max_connections, the audit log grows by a fixed
// budget (the limits' clock stands still, so their bursts are all there
// is), and an honest agent is served throughout.
func TestHostileClients(t *testing.T) {
	const maxConns, perRemote = 48, 16
	f := newFixtureWith(t, 0, nil, nil, nil, func(o *Options) {
		o.Config.HTTP = HTTPLimits{MaxConnections: maxConns, MaxConnectionsPerRemote: perRemote,
			ReadHeaderTimeout: "2s", IdleTimeout: "5s", BodyTimeout: "5s", MaxHeaderBytes: "16KiB", MaxURLBytes: "2KiB"}
		o.Config.RateLimit = RateLimits{Token: Rate{Rate: 1, Burst: 1000}, Remote: Rate{Rate: 1, Burst: 20},
			Record: Rate{Rate: 1, Burst: 5}, RecordTotal: Rate{Rate: 1, Burst: 10}}
	})
	addr := realServer(t, f)
	port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	base := "http://" + addr
	f.srv.opts.Audit.Flush()
	logBefore := logBytes(f.log)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse

	began := time.Now()
	stop := make(chan struct{})
	var attack, slow sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	hostile := 0
	count := func(status int) {
		mu.Lock()
		statuses[status]++
		hostile++
		mu.Unlock()
	}
	get := func(c *http.Client, path string, header http.Header) {
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Error(err)
			return
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		if err != nil {
			count(0)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		count(resp.StatusCode)
	}
	// Floods: no token, a wrong token, long paths.
	flood := from("127.0.0.2", 8)
	for w := range 8 {
		attack.Add(1)
		go func() {
			defer attack.Done()
			for i := range 250 {
				h := http.Header{}
				if w%2 == 1 {
					h.Set("Authorization", "Bearer not-a-token")
				}
				get(flood, fmt.Sprintf("/v1/sandboxes/%d/%s", i, strings.Repeat("x", 1500)), h)
			}
		}()
	}
	// Huge URLs (past max_url_bytes, past max_header_bytes) and headers;
	// each kind from its own connection (the server closes one after a
	// 431, half a second later).
	for _, h := range []struct {
		path   string
		header http.Header
	}{
		{"/v1/" + strings.Repeat("u", 4000), nil},
		{"/v1/" + strings.Repeat("u", 100000), nil},
		{"/v1/health", http.Header{"X-Big": {strings.Repeat("h", 100000)}}},
	} {
		attack.Add(1)
		go func() {
			defer attack.Done()
			huge := from("127.0.0.3", 1)
			for range 10 {
				get(huge, h.path, h.header)
			}
		}()
	}
	// Slowloris: headers a byte at a time, from two addresses, many
	// connections each.
	for _, ip := range []string{"127.0.0.4", "127.0.0.5"} {
		for range 40 {
			slow.Add(1)
			go func() {
				defer slow.Done()
				c, err := dialFrom(ip, addr)
				if err != nil {
					count(0)
					return
				}
				defer c.Close()
				count(0)
				c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: x\r\n"))
				for range 300 {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if _, err := c.Write([]byte("X")); err != nil {
						return
					}
				}
			}()
		}
	}
	// Idle kept-alive connections: one request each, then nothing.
	for range 30 {
		slow.Add(1)
		go func() {
			defer slow.Done()
			c, err := dialFrom("127.0.0.6", addr)
			if err != nil {
				count(0)
				return
			}
			defer c.Close()
			c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				count(0)
				return
			}
			io.Copy(io.Discard, resp.Body)
			count(resp.StatusCode)
			<-stop
		}()
	}

	// The honest agent, meanwhile, from its own address.
	agent := client.New(base, f.tokens["alice-a"])
	ctx := context.Background()
	sb, err := agent.Create(ctx, "")
	if err != nil {
		t.Fatalf("the honest agent's create during the attack: %v", err)
	}
	maxSockets := 0
	for i := range 30 {
		r, err := agent.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"echo", strconv.Itoa(i)}})
		if err != nil || !strings.Contains(string(r.Stdout), "ran echo "+strconv.Itoa(i)) {
			t.Fatalf("the honest agent's command %d during the attack: %+v %v", i, r, err)
		}
		maxSockets = max(maxSockets, serverSockets(t, port))
	}
	t.Logf("the honest agent done after %v", time.Since(began))
	// Until the floods end, then the slow ones are let go.
	for _, wg := range []*sync.WaitGroup{&attack, &slow} {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for waiting := true; waiting; {
			select {
			case <-done:
				waiting = false
			case <-time.After(50 * time.Millisecond):
				maxSockets = max(maxSockets, serverSockets(t, port))
			}
		}
		if wg == &attack {
			t.Logf("the floods done after %v", time.Since(began))
			close(stop)
		}
	}
	if _, err := agent.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"true"}}); err != nil {
		t.Fatalf("the honest agent after the attack: %v", err)
	}
	f.srv.summarize()
	f.srv.opts.Audit.Flush()
	runtime.ReadMemStats(&ms)
	grown := logBytes(f.log) - logBefore

	// What the log holds of the attack: at most the burst of records
	// without a token, each capped, and the summary of the rest.
	anonymous, summaries, unrecorded, attackBytes := 0, 0, 0, 0
	data, _ := os.ReadFile(f.log)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		json.Unmarshal([]byte(line), &r)
		switch {
		case r.Type == "api_request" && r.Data["token"] == "":
			anonymous++
			attackBytes += len(line) + 1
			if len(r.Data["path"].(string)) > maxRecordedPath {
				t.Errorf("a recorded path of %d bytes", len(r.Data["path"].(string)))
			}
		case r.Type == "api_requests_unrecorded":
			summaries++
			attackBytes += len(line) + 1
			unrecorded += int(r.Data["requests"].(float64))
		}
	}
	t.Logf("hostile requests and connections: %d, by status: %v", hostile, statuses)
	t.Logf("server sockets at most: %d (max_connections %d)", maxSockets, maxConns)
	t.Logf("audit log: grew %d bytes, %d of them the attack's (%d per 1000 hostile requests); %d records without a token, %d left out and summed up",
		grown, attackBytes, int64(attackBytes)*1000/int64(max(hostile, 1)), anonymous, unrecorded)
	t.Logf("heap in use: %d MiB before, %d MiB after", heapBefore>>20, ms.HeapInuse>>20)
	if maxSockets > maxConns {
		t.Errorf("the server held %d connections, past max_connections %d", maxSockets, maxConns)
	}
	if anonymous > 10 {
		t.Errorf("%d requests without a valid token were recorded, past rate_limit.record_total's burst of 10", anonymous)
	}
	if summaries != 1 || unrecorded == 0 {
		t.Errorf("the requests left out of the log were not summed up in it: %d summaries of %d requests", summaries, unrecorded)
	}
	if budget := 16 << 10; attackBytes > budget {
		t.Errorf("the attack's records take %d bytes of the audit log, past its budget of %d", attackBytes, budget)
	}
	if budget := int64(128 << 10); grown > budget {
		t.Errorf("the audit log grew %d bytes under attack, past its budget of %d", grown, budget)
	}
	if statuses[429] == 0 || statuses[414] == 0 || statuses[431] == 0 {
		t.Errorf("the attack was not refused as it should be: %v", statuses)
	}
}
