package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// needTools skips the test unless go and bash are on PATH; the release
// tests build cordon, which takes minutes, so -short skips them too.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cordon from scratch; skipped with -short")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: %v", tool, err)
		}
	}
}

// TestBuildReproducible runs build.sh twice into two directories and checks
// both give the same files, byte for byte, and a SHA256SUMS that sha256sum -c
// accepts. Both runs share the build cache (compiling cordon for two
// architectures again would take minutes): what is checked is that nothing
// of the machine, the directory or the moment reaches the binaries.
func TestBuildReproducible(t *testing.T) {
	needTools(t, "go", "bash", "sha256sum", "python3", "npm")
	const version = "v0.0.0-reproducible"
	tmp := t.TempDir()
	dirs := []string{filepath.Join(tmp, "a"), filepath.Join(tmp, "b")}
	for _, dir := range dirs {
		cmd := exec.Command("bash", "build.sh", "-o", dir, version)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build.sh -o %s %s: %v\n%s", dir, version, err, out)
		}
	}
	bins := []string{
		"cordon-" + version + "-linux-amd64",
		"cordon-" + version + "-linux-arm64",
	}
	want := append([]string{
		"SHA256SUMS",
		"cordon-sandbox-sdk-0.0.0-reproducible.tgz",
		"cordon_sandbox-0.0.0+reproducible-py3-none-any.whl",
		"cordon_sandbox-0.0.0+reproducible.tar.gz",
	}, bins...)
	slices.Sort(want)
	for _, dir := range dirs {
		if got := names(t, dir); !slices.Equal(got, want) {
			t.Fatalf("build.sh wrote %q into %s, want %q", got, dir, want)
		}
		check := exec.Command("sha256sum", "-c", "SHA256SUMS")
		check.Dir = dir
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c SHA256SUMS in %s: %v\n%s", dir, err, out)
		}
	}
	for _, name := range want {
		a, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds of the same source (%d and %d bytes)", name, len(a), len(b))
		}
	}
	// The binaries are static and carry the version they were given (a
	// -trimpath build does not record its -ldflags); the one of this
	// machine's architecture runs and says it.
	for _, name := range bins {
		out, err := exec.Command("go", "version", "-m", filepath.Join(dirs[0], name)).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m %s: %v\n%s", name, err, out)
		}
		for _, setting := range []string{"CGO_ENABLED=0", "-trimpath=true"} {
			if !strings.Contains(string(out), setting) {
				t.Errorf("%s was not built with %s:\n%s", name, setting, out)
			}
		}
		bin, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(bin, []byte(version)) {
			t.Errorf("%s does not hold its version %s", name, version)
		}
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return
	}
	host := filepath.Join(dirs[0], "cordon-"+version+"-linux-"+runtime.GOARCH)
	out, err := exec.Command(host, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", host, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "cordon "+version {
		t.Errorf("%s version printed %q, want %q", host, got, "cordon "+version)
	}
}

// TestBuildRejectsBadVersion: a version that is not semantic is refused
// before anything is built.
func TestBuildRejectsBadVersion(t *testing.T) {
	needTools(t, "bash")
	dir := t.TempDir()
	out, err := exec.Command("bash", "build.sh", "-o", dir, "1.2").CombinedOutput()
	if err == nil {
		t.Fatalf("build.sh 1.2 succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "version 1.2 is not a semantic version") {
		t.Errorf("build.sh 1.2 said %q, want it to name the bad version", out)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("build.sh 1.2 wrote %q", got)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}
