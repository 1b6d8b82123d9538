package client_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/testbin"
)

// The examples run against a real cordon serve that TestMain starts (from
// $CORDON_BIN, or built here), its address and token in CORDON_URL and
// CORDON_TOKEN as a user's program would find them. On a host that cannot
// run cordon sandboxes, the examples are skipped (they still compile).
func TestMain(m *testing.M) {
	flag.Parse()
	stop, err := startServe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "skipping the examples: %v\n", err)
		flag.Set("test.skip", "^Example")
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

// demoProfile is the examples' agent: a sandbox with the system's tools,
// a private workspace, and low limits that the examples reach.
const demoProfile = `version: 1
agent: demo
workspace:
  path: .
  writable: true
mounts:
  - path: /usr
  - path: /bin
  - path: /lib
  - path: /lib64
    optional: true
env:
  set:
    PATH: /usr/bin:/bin
resources:
  memory: 64MiB
  wall: 30s
`

// startServe starts cordon serve in a directory of its own and returns
// how to stop it (and remove the directory).
func startServe() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "cordon-client-test")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	os.Chmod(dir, 0o755)
	bin := os.Getenv("CORDON_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "cordon")
		if err := testbin.Cordon(bin); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command(bin, "doctor").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("this host cannot run cordon sandboxes (cordon doctor: %v)\n%s", err, out)
	}
	b := make([]byte, 16)
	rand.Read(b)
	token := "cordon_" + hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	cfg := fmt.Sprintf("agents:\n  demo:\n    profile: demo.yaml\n    pool: 2\ntokens:\n  - name: demo-token\n    agent: demo\n    sha256: %x\n", sum)
	for name, text := range map[string]string{"serve.yaml": cfg, "demo.yaml": demoProfile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	var log strings.Builder
	cmd := exec.Command(bin, "serve", "--config", filepath.Join(dir, "serve.yaml"), "--listen", addr)
	cmd.Env = append(os.Environ(), "CORDON_STATE_DIR="+filepath.Join(dir, "state"), "CORDON_AUDIT_LOG="+filepath.Join(dir, "audit.jsonl"), "HOME="+dir)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &log, &log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	c := client.New("http://"+addr, token)
	for try := 0; ; try++ {
		if _, err := c.Health(context.Background()); err == nil {
			break
		}
		select {
		case <-exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("cordon serve ended: %s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if try == 600 {
			stop()
			return nil, fmt.Errorf("cordon serve did not answer in 30s: %s", log.String())
		}
	}
	os.Setenv("CORDON_URL", "http://"+addr)
	os.Setenv("CORDON_TOKEN", token)
	return stop, nil
}
