package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/server"
)

// hosted are start times hosted sandboxes publish for themselves (not
// measured here: they need the network and an account).
var hosted = []struct {
	name, claim string
	ms          float64
}{
	{"E2B", "sandbox start, as published (~150 ms)", 150},
	{"Daytona", "sandbox creation, as published (under 90 ms)", 90},
}

// served measures cordon serve: claiming a pre-warmed sandbox and running
// /bin/true in it through the API, a command in a sandbox already claimed,
// and a sandbox built on demand, interleaved with a bare fork/exec of
// /bin/true, n rounds; with the audit log fsynced before each answer (the
// default) and every 100 ms.
func served(w *bytes.Buffer, cordon string, n int) {
	fmt.Fprintf(w, "### cordon serve: `/bin/true` through the API\n\n")
	type row struct {
		what string
		d    []time.Duration
		fail int
	}
	var rows []row
	var bare, warm time.Duration
	for _, sync := range []string{"each", "100ms"} {
		res, failed, err := serveRounds(cordon, n, sync)
		if err != nil {
			fmt.Fprintf(w, "(audit_sync %s: not measured: %v)\n\n", sync, err)
			continue
		}
		for _, k := range serveKinds {
			once := k == serveKinds[0] || k == serveKinds[len(serveKinds)-1]
			if once && bare != 0 {
				continue
			}
			what := k
			if !once {
				what += ", audit_sync " + sync
			}
			rows = append(rows, row{what, res[k], failed[k]})
		}
		if bare == 0 {
			bare = median(res[serveKinds[0]])
		}
		if sync == "each" {
			warm = median(res[serveKinds[1]])
		}
	}
	if bare > 0 && warm > 0 {
		record(goalServeHTTP, float64(warm)/float64(bare))
	}
	fmt.Fprintf(w, "%d interleaved rounds; each claim takes a sandbox built ahead (namespaces, root, Landlock, seccomp, cgroup), never used before. With audit_sync each (the default), a command's records are on the disk (fsync) before its answer; with 100ms they are written before it and fsynced within 100 ms. The check: claim + run within 2x a bare fork/exec. The last row is the floor of any request to a server on this host: a round trip that runs nothing.\n\n", n)
	fmt.Fprintf(w, "| what | median ms | IQR ms | vs bare fork/exec |\n|---|---:|---:|---:|\n")
	for _, r := range rows {
		if len(r.d) == 0 {
			fmt.Fprintf(w, "| %s | failed (%d) | | |\n", r.what, r.fail)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s-%s | %s |\n", r.what, ms(median(r.d)), ms(quantile(r.d, 0.25)), ms(quantile(r.d, 0.75)), ratio(median(r.d), bare))
	}
	idleServedRow(w, cordon)
	fmt.Fprintf(w, "\nHosted sandboxes, by their own published figures (over the network, not comparable to loopback, and not measured here):\n\n| service | published | cordon warm claim + run is |\n|---|---|---:|\n")
	for _, h := range hosted {
		if warm > 0 {
			fmt.Fprintf(w, "| %s | %s | %.0fx faster |\n", h.name, h.claim, h.ms/(float64(warm)/1e6))
		}
	}
	fmt.Fprintln(w)
}

var serveKinds = []string{"bare fork/exec", "claim a warm sandbox + run, one request", "claim a warm sandbox, then run: two requests", "run in a claimed sandbox", "build a sandbox + run, one request", "an API request that runs nothing (GET /v1/health)"}

// idleServed measures what a waiting sandbox of cordon serve costs in
// memory: the PSS of the server's process tree with k sandboxes in its
// pool, less that with none, over k.
func idleServed(cordon string, k int) (float64, error) {
	var kib [2]int64
	for i, pool := range []int{0, k} {
		dir, err := os.MkdirTemp("", "cordon-bench-idle-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		token, sum := server.NewToken()
		cfg := fmt.Sprintf("agents:\n  idle:\n    profile: default\n    pool: %d\ntokens:\n  - name: t\n    agent: idle\n    sha256: %s\n", pool, sum)
		os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte(cfg), 0o644)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command(cordon, "serve", "--config", filepath.Join(dir, "serve.yaml"), "--listen", addr)
		cmd.Env = append(os.Environ(), "CORDON_STATE_DIR="+filepath.Join(dir, "state"))
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		c := client.New("http://"+addr, token)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if h, err := c.Health(context.Background()); err == nil && h.Warm == pool {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				return 0, fmt.Errorf("the pool of %d did not fill", pool)
			}
		}
		time.Sleep(time.Second) // settled
		for _, pid := range tree(cmd.Process.Pid) {
			p, _ := pss(pid)
			kib[i] += p
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	return float64(kib[1]-kib[0]) / 1024 / float64(k), nil
}

// serveRounds starts cordon serve with audit_sync and measures each of
// serveKinds n times, interleaved.
func serveRounds(cordon string, n int, sync string) (map[string][]time.Duration, map[string]int, error) {
	dir, err := os.MkdirTemp("", "cordon-bench-serve-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	token, sum := server.NewToken()
	cold, coldSum := server.NewToken()
	const pool = 4
	cfg := fmt.Sprintf("audit_sync: %s\nagents:\n  warm:\n    profile: default\n    pool: %d\n  cold:\n    profile: default\ntokens:\n  - name: warm\n    agent: warm\n    sha256: %s\n  - name: cold\n    agent: cold\n    sha256: %s\n", sync, pool, sum, coldSum)
	os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte(cfg), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(cordon, "serve", "--config", filepath.Join(dir, "serve.yaml"), "--listen", addr)
	cmd.Env = append(os.Environ(), "CORDON_STATE_DIR="+filepath.Join(dir, "state"))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	ctx := context.Background()
	c, cc := client.New("http://"+addr, token), client.New("http://"+addr, cold)
	ready := func() bool { h, err := c.Health(ctx); return err == nil && h.Warm == pool }
	for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("the server did not fill its pool: %s", bytes.TrimSpace(log.Bytes()))
		}
	}
	trueReq := api.ExecRequest{Args: []string{"/bin/true"}}
	kept, err := c.Create(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	res := map[string][]time.Duration{}
	failed := map[string]int{}
	for round := 0; round < n; round++ {
		for !ready() {
			time.Sleep(5 * time.Millisecond)
		}
		// The sandboxes just built and the one just killed settle first:
		// what is measured is a claim from a full pool on a quiet host.
		time.Sleep(50 * time.Millisecond)
		order := []int{0, 1, 2, 3, 4, 5}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			var id string
			var killWith *client.Client
			start := time.Now()
			var err error
			switch k {
			case 0:
				err = exec.Command("/bin/true").Run()
			case 1:
				var sb api.Sandbox
				if sb, err = c.CreateAndRun(ctx, trueReq); err == nil {
					id, killWith = sb.ID, c
					err = ranFirst(sb)
				}
			case 2:
				var sb api.Sandbox
				if sb, err = c.Create(ctx, ""); err == nil {
					id, killWith = sb.ID, c
					err = ran(c.Run(ctx, sb.ID, trueReq))
				}
			case 3:
				err = ran(c.Run(ctx, kept.ID, trueReq))
			case 4:
				var sb api.Sandbox
				if sb, err = cc.CreateAndRun(ctx, trueReq); err == nil {
					id, killWith = sb.ID, cc
					err = ranFirst(sb)
				}
			case 5:
				_, err = c.Health(ctx)
			}
			took := time.Since(start)
			if err != nil {
				failed[serveKinds[k]]++
			} else {
				res[serveKinds[k]] = append(res[serveKinds[k]], took)
			}
			if id != "" {
				killWith.Kill(ctx, id)
			}
		}
	}
	return res, failed, nil
}

func ranFirst(sb api.Sandbox) error {
	if sb.Result == nil {
		return fmt.Errorf("sandbox %s: no result of its first command", sb.ID)
	}
	return ran(*sb.Result, nil)
}

func ran(res api.ExecResult, err error) error {
	if err != nil {
		return err
	}
	if res.Outcome.Status != "ok" {
		return fmt.Errorf("%s", res.Outcome.Message)
	}
	return nil
}

// idleServedRow reports what a waiting sandbox of cordon serve costs.
func idleServedRow(w *bytes.Buffer, cordon string) {
	if mib, err := idleServed(cordon, 32); err == nil {
		fmt.Fprintf(w, "\nMemory per idle pre-warmed sandbox: %.1f MiB (PSS of cordon serve and its processes with 32 sandboxes waiting, less with none, over 32).\n", mib)
		record(goalIdleServe, mib)
	} else {
		fmt.Fprintf(w, "\nMemory per idle pre-warmed sandbox: not measured (%v).\n", err)
	}
}
