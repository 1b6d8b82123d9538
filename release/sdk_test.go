package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSDKInstallOffline packs the SDKs as a release does (sdk.sh) and
// installs each as its README says, with every package index out of reach:
// pip into a fresh virtual environment (the wheel, the source archive, and
// the checkout itself), npm into a fresh project with an empty cache. Each
// installed package is then imported and must name its sandbox and errors.
func TestSDKInstallOffline(t *testing.T) {
	for _, tool := range []string{"bash", "python3", "npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: %v", tool, err)
		}
	}
	if err := exec.Command("python3", "-c", "import ensurepip, venv, tomllib").Run(); err != nil {
		t.Skip("python3 has no venv, ensurepip or tomllib (Debian: python3-venv; Python 3.11 or later)")
	}
	const version = "v1.2.3-rc.4"
	tmp := t.TempDir()
	dist := filepath.Join(tmp, "dist")
	out, err := exec.Command("bash", "sdk.sh", "-o", dist, version).CombinedOutput()
	if err != nil {
		t.Fatalf("sdk.sh -o %s %s: %v\n%s", dist, version, err, out)
	}
	if got, want := strings.Fields(string(out)), []string{
		"cordon_sandbox-1.2.3rc4-py3-none-any.whl",
		"cordon_sandbox-1.2.3rc4.tar.gz",
		"cordon-sandbox-sdk-1.2.3-rc.4.tgz",
	}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("sdk.sh printed %q, want %q", got, want)
	}
	// Nothing reachable: an index, a registry or a proxy asked for
	// anything gets a refused connection.
	dead := "http://127.0.0.1:9/"
	offline := append(os.Environ(),
		"PIP_INDEX_URL="+dead, "PIP_EXTRA_INDEX_URL=", "PIP_FIND_LINKS=", "PIP_NO_INDEX=1",
		"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_CONFIG_FILE=/dev/null",
		"npm_config_registry="+dead, "npm_config_offline=true", "npm_config_cache="+filepath.Join(tmp, "npm-cache"),
		"npm_config_userconfig="+filepath.Join(tmp, "npmrc"), "npm_config_globalconfig="+filepath.Join(tmp, "npmrc-global"),
		"HTTP_PROXY="+dead, "HTTPS_PROXY="+dead, "http_proxy="+dead, "https_proxy="+dead,
		"PYTHONDONTWRITEBYTECODE=1", "HOME="+tmp)
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, offline
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	pyCheck := `import importlib.metadata as m, cordon
print(m.version("cordon-sandbox"), cordon.Sandbox.__name__, cordon.CordonError.__name__)`
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, arg, version string }{
		{"wheel", filepath.Join(dist, "cordon_sandbox-1.2.3rc4-py3-none-any.whl"), "1.2.3rc4"},
		{"source archive", filepath.Join(dist, "cordon_sandbox-1.2.3rc4.tar.gz"), "1.2.3rc4"},
		{"checkout", filepath.Join(root, "sdk", "python"), ""},
	} {
		venv := filepath.Join(tmp, "venv-"+strings.ReplaceAll(c.what, " ", "-"))
		run(tmp, "python3", "-m", "venv", venv)
		run(tmp, filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--no-cache-dir", c.arg)
		got := run(tmp, filepath.Join(venv, "bin", "python"), "-c", pyCheck)
		if !strings.HasSuffix(got, " Sandbox CordonError\n") || (c.version != "" && !strings.HasPrefix(got, c.version+" ")) {
			t.Errorf("the Python SDK installed from its %s says %q, want version %q, Sandbox and CordonError", c.what, got, c.version)
		}
	}

	project := filepath.Join(tmp, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "package.json"), []byte(`{"name": "app", "version": "1.0.0", "type": "module", "private": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(project, "npm", "install", "--no-audit", "--no-fund", filepath.Join(dist, "cordon-sandbox-sdk-1.2.3-rc.4.tgz"))
	got := run(project, "node", "--input-type=module", "-e", `
import { Sandbox, CordonError } from "@cordon-sandbox/sdk";
import { readFileSync } from "node:fs";
const p = JSON.parse(readFileSync("node_modules/@cordon-sandbox/sdk/package.json", "utf8"));
console.log(p.version, Sandbox.name, CordonError.name);`)
	if got != "1.2.3-rc.4 Sandbox CordonError\n" {
		t.Errorf("the TypeScript SDK installed from its tarball says %q, want 1.2.3-rc.4, Sandbox and CordonError", got)
	}
}
