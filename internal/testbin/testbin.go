// Package testbin builds cordon for tests as build.sh builds it for users:
// with the lean sandbox program inside, so that tests run what ships.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Cordon builds cordon into out; flags are go build's (build.sh's default
// without any).
func Cordon(out string, flags ...string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", append([]string{filepath.Join(root, "build.sh"), "-o", out}, flags...)...)
	// The go that runs the tests builds cordon, whatever PATH says.
	path := filepath.Join(runtime.GOROOT(), "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "PATH="+path)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building cordon: %v\n%s", err, b)
	}
	return nil
}

// Root is the directory of cordon's module.
func Root() (string, error) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	b, err := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}", "github.com/cordon-sandbox/cordon").Output()
	if err != nil {
		return "", fmt.Errorf("finding cordon's module: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
