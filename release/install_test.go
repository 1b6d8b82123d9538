package release

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const modulePath = "github.com/cordon-sandbox/cordon"

// TestGoInstall publishes the working tree at a made-up version on a module
// proxy in a directory (the GOPROXY protocol over file://), then runs
// `go install github.com/cordon-sandbox/cordon/cmd/cordon@VERSION` as a user
// would, in an empty GOPATH, and checks the installed cordon reports that
// version. Dependencies come from the module cache's download directory,
// else from the proxy `go env GOPROXY` names; the test is skipped when that
// is off or unreachable.
func TestGoInstall(t *testing.T) {
	needTools(t, "go", "git")
	const version = "v0.0.0-test"
	tmp := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	proxy := filepath.Join(tmp, "proxy")
	if err := publish(root, proxy, version); err != nil {
		t.Fatalf("making the module proxy: %v", err)
	}

	realProxy := goEnv(t, "GOPROXY")
	gopath := filepath.Join(tmp, "gopath")
	proxies := []string{"file://" + proxy}
	if cache := goEnv(t, "GOMODCACHE"); cache != "" {
		proxies = append(proxies, "file://"+filepath.Join(cache, "cache", "download"))
	}
	proxies = append(proxies, realProxy)
	cmd := exec.Command("go", "install", modulePath+"/cmd/cordon@"+version)
	cmd.Dir = tmp
	// Only what the test sets: not the go env file, not a workspace, not the
	// caller's GOFLAGS, GOBIN or private-module settings. -trimpath lets the
	// dependencies compiled for other builds (.ci/run's, the tests') be
	// reused from the build cache, although their files are in a new GOPATH.
	cmd.Env = append(os.Environ(),
		"GOENV=off", "GOWORK=off", "GOFLAGS=-modcacherw -trimpath", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"GOPATH="+gopath, "GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"), "GOBIN=",
		"GOPROXY="+strings.Join(proxies, ","), "GOSUMDB=off", "GONOSUMDB=*", "GOPRIVATE=", "GONOPROXY=",
		"GOOS=", "GOARCH=",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if reason := unreachable(realProxy, string(out)); reason != "" {
			t.Skipf("the module proxy for cordon's dependencies is not reachable (%s):\n%s", reason, out)
		}
		t.Fatalf("go install %s/cmd/cordon@%s: %v\n%s", modulePath, version, err, out)
	}

	bin := filepath.Join(gopath, "bin", "cordon")
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, got)
	}
	if s := strings.TrimSpace(string(got)); s != "cordon "+version {
		t.Errorf("the installed cordon's version printed %q, want %q", s, "cordon "+version)
	}
	got, err = exec.Command(bin, "version", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version --json: %v\n%s", bin, err, got)
	}
	var info struct{ Version, Module string }
	if err := json.Unmarshal(got, &info); err != nil {
		t.Fatalf("%s version --json: %v\n%s", bin, err, got)
	}
	if info.Version != version || info.Module != modulePath {
		t.Errorf("the installed cordon's version --json = %s, want version %s and module %s", got, version, modulePath)
	}
}

// unreachable says why out, the output of a failed go command, shows the
// module proxy could not be reached, or "" when it shows something else.
func unreachable(proxy, out string) string {
	if proxy == "off" {
		return "GOPROXY=off"
	}
	for _, sign := range []string{"dial tcp", "no such host", "connection refused", "i/o timeout", "network is unreachable", "proxyconnect", "TLS handshake timeout", "Temporary failure in name resolution"} {
		if strings.Contains(out, sign) {
			return sign
		}
	}
	return ""
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// publish lays out dir as a module proxy (MODULE/@v/list, VERSION.info,
// .mod and .zip) serving the module at root as version.
func publish(root, dir, version string) error {
	files, err := moduleFiles(root)
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	var zipped bytes.Buffer
	if err := moduleZip(&zipped, root, files, modulePath+"@"+version); err != nil {
		return fmt.Errorf("zipping the module: %w", err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Date(2024, 1, 2, 15, 4, 5, 0, time.UTC)})
	if err != nil {
		return err
	}
	v := filepath.Join(dir, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(v, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// moduleFiles lists the files of the module at root as a published version
// would hold them: those git tracks or would track (not ignored), that are
// regular files, outside vendor directories, VCS directories and nested
// modules (a directory with a go.mod of its own).
func moduleFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the module's files with git ls-files in %s: %w", root, err)
	}
	var nested []string
	var candidates []string
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		if path.Base(name) == "go.mod" && name != "go.mod" {
			nested = append(nested, path.Dir(name)+"/")
		}
		candidates = append(candidates, name)
	}
	var files []string
	for _, name := range candidates {
		if excluded(name, nested) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(name)))
		if os.IsNotExist(err) {
			continue // tracked, deleted in the working tree
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode().IsRegular() {
			files = append(files, name)
		}
	}
	return files, nil
}

func excluded(name string, nested []string) bool {
	for _, dir := range nested {
		if strings.HasPrefix(name, dir) {
			return true
		}
	}
	for _, elem := range strings.Split(path.Dir(name), "/") {
		switch elem {
		case "vendor", ".git", ".hg", ".svn", ".bzr":
			return true
		}
	}
	return false
}

// moduleZip writes the module zip of files under root: each file at
// prefix/NAME, as the go command expects.
func moduleZip(w io.Writer, root string, files []string, prefix string) error {
	zw := zip.NewWriter(w)
	for _, name := range files {
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		dst, err := zw.Create(prefix + "/" + name)
		if err == nil {
			_, err = io.Copy(dst, f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return zw.Close()
}
