// Package python_test runs the Python client's tests (sdk/python/tests,
// unittest) under go test, against a cordon built here: they start their
// own cordon serve. Skipped without python3.
package python_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/testbin"
)

func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	bin := os.Getenv("CORDON_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "cordon")
		if err := testbin.Cordon(bin); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Env = append(os.Environ(), "CORDON_BIN="+bin, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
	if m := regexp.MustCompile(`skipped '([^']*)'`).FindSubmatch(out); m != nil {
		t.Skipf("the Python tests skipped: %s", m[1])
	}
}
