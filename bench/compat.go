package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The markers around the table in docs/COMPATIBILITY.md that -docs
// rewrites.
const (
	compatBegin = "<!-- compat table: bench/run -only compat -docs rewrites it -->"
	compatEnd   = "<!-- end of compat table -->"
)

// compat runs the compatibility suite (internal/compat) and prints its
// table: each workload under cordon as root, cordon rootless and
// bubblewrap, pass or fail and wall time. With docs it also rewrites the
// table in docs/COMPATIBILITY.md. A failing suite still prints its table,
// then fails.
func compat(repo string, docs bool) error {
	f, err := os.CreateTemp("", "cordon-compat-*.md")
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestCompat$", "./internal/compat")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CORDON_COMPAT_REPORT="+f.Name())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runErr := cmd.Run()
	table, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	if len(table) == 0 {
		return fmt.Errorf("the compatibility suite wrote no table (go test: %v)", runErr)
	}
	rep := fmt.Sprintf("Measured %s on %s.\n\n%s", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), table)
	os.Stdout.WriteString(rep)
	if docs {
		if err := rewriteBetween(filepath.Join(repo, "docs", "COMPATIBILITY.md"), rep); err != nil {
			return err
		}
	}
	if runErr != nil {
		return fmt.Errorf("the compatibility suite failed: %w", runErr)
	}
	return nil
}

// rewriteBetween replaces what lies between the compat markers in file.
func rewriteBetween(file, body string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(compatBegin)), bytes.Index(b, []byte(compatEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q markers to write the table between", file, compatBegin, compatEnd)
	}
	out := string(b[:i+len(compatBegin)]) + "\n" + strings.TrimSpace(body) + "\n" + string(b[j:])
	return os.WriteFile(file, []byte(out), 0o644)
}
