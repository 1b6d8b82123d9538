// Package typescript holds the TypeScript SDK of cordon serve
// (@cordon-sandbox/sdk: index.js and its types, index.d.ts). Its Go test
// runs the SDK's own tests (node --test) against a real cordon serve, and
// type-checks the declarations with tsc, so that go test ./... covers it.
package typescript_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/testbin"
)

// nodeMajor is the major version of the node on PATH; 0 when there is none.
func nodeMajor(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("node --version: unexpected %q", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// cordonBinary is $CORDON_BIN, else cordon built from this module.
func cordonBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CORDON_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "cordon")
	if err := testbin.Cordon(bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestNode runs test/sdk.test.js with Node's test runner: a sandbox
// created on a real cordon serve, a command with streamed output, files
// written, read and listed, a limit of the profile as a LimitError.
func TestNode(t *testing.T) {
	switch n := nodeMajor(t); {
	case n == 0:
		t.Skip("node is not installed: the TypeScript SDK's tests are skipped")
	case n < 18:
		t.Skipf("node %d is older than the SDK supports (18)", n)
	}
	if testing.Short() {
		t.Skip("starts cordon serve")
	}
	cmd := exec.Command("node", "--test", "test/sdk.test.js")
	cmd.Env = append(os.Environ(), "CORDON_BIN="+cordonBinary(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	// A suite that skipped says so: this host could not run sandboxes.
	if m := regexp.MustCompile(`(?m)^# skipped (\d+)$`).FindSubmatch(out); m == nil {
		t.Fatalf("node --test printed no summary:\n%s", out)
	} else if string(m[1]) != "0" {
		t.Skipf("node --test skipped %s tests:\n%s", m[1], out)
	}
	t.Logf("%s", out)
}

// TestTypes type-checks index.d.ts as a TypeScript user's code uses it
// (test/types.ts, strict), with the TypeScript of package-lock.json.
func TestTypes(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the SDK's declarations are not type-checked")
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "index.js", "index.d.ts", "test/types.ts", "test/tsconfig.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Skipf("npm ci could not install TypeScript (no registry?): %v\n%s", err, out)
	}
	tsc := exec.Command(filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", "test/tsconfig.json")
	tsc.Dir = dir
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}
