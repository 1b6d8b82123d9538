package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/server"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// TestServeCluster runs three cordon serve nodes on loopback sharing one
// PostgreSQL, with nginx in front of all three. A client that knows only
// one node's address creates 64 sandboxes, which are spread over the
// nodes by room, and runs 1000 commands in them; through nginx, commands
// and files reach each sandbox's node from any node. Approvals filed
// anywhere are decided on one node and seen on another, and every node
// queries the audit index of all. One node is then killed (SIGKILL): the
// others declare it dead, its sandboxes are reported ended (node_lost)
// to their agent, and nothing the others acknowledged is lost. Every
// node's audit log verifies, and nothing is left behind on any node.
func TestServeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("no nginx (Debian package nginx; .ci/run installs it)")
	}
	db := testSchema(t)
	ctx := context.Background()
	secret := filepath.Join(t.TempDir(), "cluster.secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("5e", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, name := range []string{"worker", "ops"} {
		tokens[name], _ = server.NewToken()
	}
	const perNode = 24
	agents := fmt.Sprintf("  worker:\n    profile: default\n    pool: 2\n    max_sandboxes: %d\n", perNode)
	var nodes []*served
	for i := 1; i <= 3; i++ {
		top := fmt.Sprintf("database: %q\nnode: node-%d\ncluster:\n  advertise: http://{{listen}}\n  secret_file: %q\n  heartbeat: 250ms\n  node_timeout: 6s\n", db, i, secret)
		nodes = append(nodes, startServeWith(t, agents, nil, top, tokens))
	}
	proxy := startNginx(t, nginx, nodes)

	// One address: node-1's.
	const sandboxes, commands = 64, 1000
	one := nodes[0].client("worker")
	one.Retry = client.RetryPolicy{MaxRetries: 100, MaxWait: 10 * time.Minute}
	type acked struct{ node, out string }
	var (
		mu       sync.Mutex
		failures []string
		on       = map[string]string{}  // sandbox -> node
		answered = map[string][]acked{} // sandbox -> commands answered
	)
	failed := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := 0; i < sandboxes; i++ {
		n := commands / sandboxes
		if i < commands%sandboxes {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := one.Create(ctx, "")
			if err != nil {
				failed("create: %v", err)
				return
			}
			mu.Lock()
			on[sb.ID] = sb.Node
			mu.Unlock()
			for j := 0; j < n; j++ {
				want := fmt.Sprintf("%d.%d", i, j)
				res, err := one.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"echo", want}})
				switch {
				case err != nil:
					failed("%s on %s: %v", want, sb.Node, err)
				case res.Outcome.Status != outcome.OK || string(res.Stdout) != want+"\n":
					failed("%s on %s: %q %s", want, sb.Node, res.Stdout, res.Outcome.Message)
				default:
					mu.Lock()
					answered[sb.ID] = append(answered[sb.ID], acked{sb.Node, want})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	done := 0
	for _, a := range answered {
		done += len(a)
	}
	if len(failures) > 0 || done != commands {
		for i, n := range nodes {
			t.Logf("node-%d's output:\n%s", i+1, n.log)
		}
		t.Fatalf("%d of %d commands answered through one node; failures: %s", done, commands, strings.Join(failures[:min(len(failures), 5)], "; "))
	}
	per := map[string][]string{}
	for id, node := range on {
		per[node] = append(per[node], id)
	}
	for i := 1; i <= 3; i++ {
		// 64 sandboxes on nodes of room 24: at least 16 on each.
		if n := len(per[fmt.Sprintf("node-%d", i)]); n < sandboxes-2*perNode || n > perNode {
			t.Fatalf("sandboxes per node: node-1 %d, node-2 %d, node-3 %d", len(per["node-1"]), len(per["node-2"]), len(per["node-3"]))
		}
	}

	// Through nginx, which sends each request to any node: commands and
	// files reach the sandbox's node.
	px := client.New(proxy, tokens["worker"])
	px.Retry = client.RetryPolicy{MaxRetries: 100, MaxWait: 10 * time.Minute}
	i := 0
	for id := range on {
		i++
		want := "via nginx " + id
		res, err := px.Run(ctx, id, api.ExecRequest{Args: []string{"echo", want}})
		if err != nil || string(res.Stdout) != want+"\n" {
			t.Fatalf("a command through nginx in %s on %s: %+v %v", id, on[id], res, err)
		}
		answered[id] = append(answered[id], acked{on[id], want})
		if i%8 == 0 {
			if err := px.Upload(ctx, id, "/workspace/f.txt", strings.NewReader(want), 0o600); err != nil {
				t.Fatalf("an upload through nginx to %s on %s: %v", id, on[id], err)
			}
			var got bytes.Buffer
			if err := px.Download(ctx, id, "/workspace/f.txt", &got); err != nil || got.String() != want {
				t.Fatalf("a download through nginx from %s on %s: %q %v", id, on[id], got.String(), err)
			}
		}
	}

	// An approval filed in the database, decided on node-2, seen on node-3.
	pg, err := statedb.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	store, err := approvals.OpenJournal(pg.Approvals(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := store.Add(approvals.Request{Tool: "deploy", Args: json.RawMessage(`{}`), Class: "irreversible", Agent: "worker", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[1].client("ops").Decide(ctx, id, true, api.Decision{Reason: "release 7"}); err != nil {
		t.Fatal(err)
	}
	if all, err := nodes[2].client("ops").Approvals(ctx, true); err != nil || len(all) != 1 || all[0].State != approvals.Approved {
		t.Fatalf("node-3's approvals: %+v %v", all, err)
	}

	// Every node queries the audit index of all.
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		sb := per[node][0]
		waitUntil(t, "node-3's index of "+node+"'s sandbox", func() bool {
			recs, err := nodes[2].client("ops").Audit(ctx, neturl.Values{"sandbox": {sb}, "type": {"outcome"}})
			return err == nil && len(recs) == len(answered[sb]) && strings.Contains(string(recs[0]), `"node": "`+node+`"`)
		})
	}

	// node-3 is killed outright.
	dead := nodes[2]
	deadPid, deadKids := dead.cmd.Process.Pid, children(dead.cmd.Process.Pid)
	dead.cmd.Process.Signal(syscall.SIGKILL)
	dead.cmd.Wait()
	lost := per["node-3"]
	waitUntil(t, "node-3's sandboxes reported lost", func() bool {
		for _, id := range lost {
			if sb, err := one.Get(ctx, id); err != nil || sb.State != "ended" || sb.Ended != "node_lost" {
				return false
			}
		}
		return true
	})
	if _, err := one.Run(ctx, lost[0], api.ExecRequest{Args: []string{"true"}}); !client.IsStatus(err, 410) || !strings.Contains(err.Error(), "node_lost") {
		t.Fatalf("a command for a lost sandbox: %v", err)
	}
	// Its processes went with it; its cgroups go when a cordon sweeps its
	// journal: the node, when it starts again (below).
	waitUntil(t, "node-3's processes to go", func() bool {
		for _, l := range dead.leftoversOf(deadPid, deadKids) {
			if !strings.HasPrefix(l, "workspace ") && !strings.HasPrefix(l, "cgroup ") {
				return false
			}
		}
		return true
	})
	// The others lost nothing they acknowledged: every command answered
	// in their sandboxes is in the index, and they go on.
	for id, node := range on {
		if node == "node-3" {
			continue
		}
		recs, err := nodes[0].client("ops").Audit(ctx, neturl.Values{"sandbox": {id}, "type": {"outcome"}})
		if err != nil || len(recs) != len(answered[id]) {
			t.Fatalf("the index holds %d outcomes of %s on %s, %d were answered (%v)", len(recs), id, node, len(answered[id]), err)
		}
		if res, err := one.Run(ctx, id, api.ExecRequest{Args: []string{"echo", "after"}}); err != nil || string(res.Stdout) != "after\n" {
			t.Fatalf("a command in %s on %s after node-3 died: %+v %v", id, node, res, err)
		}
	}

	// node-3 runs again under its name, ends what it left, and every node
	// stops cleanly: nothing is left, and every log verifies.
	dead.restart(t)
	// node-2 is drained from the command line: it stops by itself.
	drained := nodes[1]
	drain := exec.Command(filepath.Join(binDir, "cordon"), "serve", "--drain", "--config", filepath.Join(drained.dir, "serve.yaml"))
	drain.Env = drained.cmd.Env
	drainKids := children(drained.cmd.Process.Pid)
	if out, err := drain.CombinedOutput(); err != nil || !strings.Contains(string(out), "node node-2 has stopped (left)") {
		t.Fatalf("cordon serve --drain: %v\n%s", err, out)
	}
	if err := drained.cmd.Wait(); err != nil {
		t.Fatalf("node-2 after --drain: %v\n%s", err, drained.log)
	}
	if left := drained.leftovers(drainKids); len(left) > 0 {
		t.Errorf("left behind by the drained node-2: %s", strings.Join(left, "; "))
	}
	for _, s := range nodes {
		kids := children(s.cmd.Process.Pid)
		s.stop(t)
		if left := s.leftovers(kids); len(left) > 0 {
			t.Errorf("left behind by %s: %s", s.url, strings.Join(left, "; "))
		}
		if left := dead.leftoversOf(deadPid, deadKids); s == dead && len(left) > 0 {
			t.Errorf("left behind by the killed node-3: %s", strings.Join(left, "; "))
		}
		log := filepath.Join(s.dir, "audit", "audit.jsonl")
		if out, err := exec.Command(filepath.Join(binDir, "cordon"), "audit", "verify", "--log", log).CombinedOutput(); err != nil {
			t.Errorf("cordon audit verify %s: %v\n%s", log, err, out)
		}
	}
	if n, err := pg.Nodes(ctx); err != nil || len(n) != 3 || n[0].State != statedb.NodeLeft || n[1].State != statedb.NodeLeft || n[2].State != statedb.NodeLeft {
		t.Errorf("the registry after every node stopped: %+v %v", n, err)
	}
}

// startNginx runs nginx on loopback in front of the nodes, streaming both
// ways, and returns its URL.
func startNginx(t *testing.T, nginx string, nodes []*served) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var upstream strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&upstream, "    server %s;\n", strings.TrimPrefix(n.url, "http://"))
	}
	conf := fmt.Sprintf(`daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream cordon {
%[2]s    keepalive 32;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://cordon;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
      client_max_body_size 0;
    }
  }
}
`, dir, upstream.String(), addr)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT)
		cmd.Wait()
	})
	url := "http://" + addr
	c := client.New(url, "")
	waitUntil(t, "nginx to answer", func() bool { _, err := c.Health(context.Background()); return err == nil })
	return url
}

// The secrets cordon serve takes from its environment (the cluster's,
// the database's URL) reach no sandbox, even one whose profile passes
// them on.
func TestServeSecretsNotPassed(t *testing.T) {
	t.Setenv("CORDON_CLUSTER_SECRET", strings.Repeat("7f", 32))
	t.Setenv("CORDON_DATABASE", filepath.Join(t.TempDir(), "db", "cordon.db"))
	profile := strings.Replace(testProfile("builder", "  wall: 1m\n"), "env:\n", "env:\n  pass: [CORDON_CLUSTER_SECRET, CORDON_DATABASE, HOME]\n", 1)
	// Lint rates that profile an error (CL302): served anyway, it still
	// gets none of them.
	serveArgs = []string{"--allow-lint-errors"}
	defer func() { serveArgs = nil }()
	s := startServeWith(t, "  builder:\n    profile: builder.yaml\n", map[string]string{"builder.yaml": profile},
		"node: secret-node\ncluster:\n  advertise: http://{{listen}}\n", nil)
	sb, err := s.client("builder").CreateAndRun(context.Background(), api.ExecRequest{Args: []string{"sh", "-c", `echo "[$CORDON_CLUSTER_SECRET][$CORDON_DATABASE][$HOME]"`}})
	if err != nil || sb.Result == nil {
		t.Fatalf("%+v %v", sb, err)
	}
	if got := string(sb.Result.Stdout); !strings.HasPrefix(got, "[][][/") {
		t.Fatalf("the sandbox's environment: %q", got)
	}
}
