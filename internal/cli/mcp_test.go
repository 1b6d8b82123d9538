package cli_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// mcpClient is client.mjs beside an installation of the official MCP
// TypeScript SDK; empty where npm is missing.
var mcpClient string

// installMCPClient installs the TypeScript SDK client of testdata/mcpclient
// (its versions locked) into a temporary directory, with npm. Without npm
// it returns ""; where npm is present it must succeed.
func installMCPClient() (string, error) {
	if _, err := exec.LookPath("npm"); err != nil {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "cordon-mcp-client")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs", "web.mjs", "serveui.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata/mcpclient", f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", err
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("installing the MCP TypeScript SDK client with npm: %v\n%s", err, out)
	}
	return filepath.Join(dir, "client.mjs"), nil
}

// TestMCPClientInstalled fails where npm is present but the client is not,
// so that the gateway scripts do not skip silently.
func TestMCPClientInstalled(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the gateway scripts with the TypeScript client are skipped")
	}
	if os.Getenv(prebuiltEnv) != "" {
		t.Skipf("%s is set: the client is not installed, and the gateway scripts with it are skipped", prebuiltEnv)
	}
	if mcpClient == "" {
		t.Fatal("npm is present but the MCP client was not installed")
	}
}

// cmdFreePort sets VAR to a loopback TCP port that nothing listens on.
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ts.Setenv(args[0], strconv.Itoa(port))
}

// cmdWaitPort waits (up to 20 s) until something listens on the loopback
// TCP port.
func cmdWaitPort(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: waitport PORT")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+args[0], time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("nothing listens on port %s: %v", args[0], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
