package toolchain

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// fakeHost is a host laid out in a temporary directory: a home with the
// user's toolchains, a /usr, and a project to work in.
type fakeHost struct {
	t    *testing.T
	root string
	env  map[string]string
}

func newFakeHost(t *testing.T) *fakeHost {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{t: t, root: root, env: map[string]string{}}
	h.env["HOME"] = h.path("home/u")
	h.dir("home/u/proj")
	// What a home holds besides toolchains, which no bind may show.
	h.file("home/u/.ssh/id_ed25519", "key", 0o600)
	return h
}

func (h *fakeHost) path(rel string) string { return filepath.Join(h.root, rel) }

func (h *fakeHost) dir(rel string) {
	if err := os.MkdirAll(h.path(rel), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) file(rel, content string, mode os.FileMode) {
	h.dir(filepath.Dir(rel))
	if err := os.WriteFile(h.path(rel), []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) prog(rel string) { h.file(rel, "#!/bin/sh\n", 0o755) }

func (h *fakeHost) link(rel, target string) {
	h.dir(filepath.Dir(rel))
	if err := os.Symlink(target, h.path(rel)); err != nil {
		h.t.Fatal(err)
	}
}

// setPath sets the host's PATH to the directories rel names.
func (h *fakeHost) setPath(rels ...string) {
	var dirs []string
	for _, r := range rels {
		dirs = append(dirs, h.path(r))
	}
	h.env["PATH"] = strings.Join(dirs, ":")
}

// pyenv lays out a pyenv root in the home with versions, each with a
// python3 linked to python3.X, and shims for python3 and pip.
func (h *fakeHost) pyenv(versions ...string) {
	root := h.path("home/u/.pyenv")
	for _, name := range []string{"python3", "pip"} {
		h.file("home/u/.pyenv/shims/"+name, "#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\n\nexport PYENV_ROOT=\""+root+"\"\nexec \""+root+"/libexec/pyenv\" exec \"$program\" \"$@\"\n", 0o755)
	}
	h.prog("home/u/.pyenv/bin/pyenv")
	for _, v := range versions {
		h.prog("home/u/.pyenv/versions/" + v + "/bin/python3.x")
		h.link("home/u/.pyenv/versions/"+v+"/bin/python3", "python3.x")
		h.prog("home/u/.pyenv/versions/" + v + "/bin/pip")
	}
}

func (h *fakeHost) getenv(k string) (string, bool) { v, ok := h.env[k]; return v, ok }

// resolve resolves toolchains with a profile that binds the fake /usr
// read-only and the project read-write.
func (h *fakeHost) resolve(command string, toolchains ...string) (*Plan, error) {
	h.t.Helper()
	src := "version: 1\nagent: a\nworkspace:\n  path: " + h.path("home/u/proj") + "\n  writable: true\nmounts:\n  - path: " + h.path("usr") + "\n    optional: true\n"
	if len(toolchains) > 0 {
		src += "toolchains: [" + strings.Join(toolchains, ", ") + "]\n"
	}
	p, err := profile.Parse("p.yaml", []byte(src))
	if err != nil {
		h.t.Fatal(err)
	}
	return Resolve(p, command, Host{Getenv: h.getenv, Cwd: h.path("home/u/proj"), Homes: []string{h.path("home/u"), h.path("data/home/v")}})
}

// entry resolves one name and returns its entry.
func (h *fakeHost) entry(name string) Entry {
	h.t.Helper()
	pl, err := h.resolve("", name)
	if err != nil {
		h.t.Fatalf("resolving %s: %v", name, err)
	}
	if len(pl.Entries) != 1 {
		h.t.Fatalf("resolving %s: %d entries", name, len(pl.Entries))
	}
	return pl.Entries[0]
}

func TestPyenv(t *testing.T) {
	h := newFakeHost(t)
	h.pyenv("3.11.7", "3.12.1", "3.12.10")
	h.prog("usr/bin/python3")
	h.setPath("home/u/.pyenv/shims", "home/u/.pyenv/bin", "usr/bin")
	h.file("home/u/.pyenv/version", "3.11.7\n", 0o644)
	v := h.path("home/u/.pyenv/versions/")

	e := h.entry("python3")
	if e.Found != h.path("home/u/.pyenv/shims/python3") || e.Program != v+"/3.11.7/bin/python3.x" ||
		e.Prefix != v+"/3.11.7" || !e.Bound || e.PathDir != v+"/3.11.7/bin" {
		t.Errorf("python3 from the root's version file: %+v", e)
	}
	if !strings.Contains(e.Via, "pyenv 3.11.7, from "+h.path("home/u/.pyenv/version")) {
		t.Errorf("via: %q", e.Via)
	}

	// A version file in the working directory's parent beats the root's;
	// a version's prefix selects the newest of its releases.
	h.file("home/u/.python-version", "# the project's\n3.12\n", 0o644)
	if e := h.entry("python3"); e.Prefix != v+"/3.12.10" {
		t.Errorf(".python-version 3.12: prefix %s", e.Prefix)
	}
	// PYENV_VERSION beats both.
	h.env["PYENV_VERSION"] = "3.12.1"
	if e := h.entry("pip"); e.Prefix != v+"/3.12.1" || e.Program != v+"/3.12.1/bin/pip" {
		t.Errorf("PYENV_VERSION=3.12.1: %+v", e)
	}
	// system is the next python3 on the PATH, past the shims.
	h.env["PYENV_VERSION"] = "system"
	if e := h.entry("python3"); e.Program != h.path("usr/bin/python3") || e.Bound {
		t.Errorf("system: %+v", e)
	}
	// A version file cannot lead out of the versions directory: it may
	// be the sandbox's to write.
	delete(h.env, "PYENV_VERSION")
	h.file("home/u/proj/.python-version", "../../../.ssh\n", 0o644)
	if e := h.entry("python3"); e.Missing == "" || e.Bound {
		t.Errorf("version ../../../.ssh: %+v", e)
	}
	// A version not installed resolves to nothing, with the reason.
	h.file("home/u/proj/.python-version", "3.9\n", 0o644)
	if e := h.entry("python3"); !strings.Contains(e.Missing, "pyenv selects 3.9") {
		t.Errorf("version 3.9: %+v", e)
	}
	// pyenv itself lives in its root, which holds every version: only its
	// bin directory would be bound.
	if e := h.entry("pyenv"); e.Prefix != h.path("home/u/.pyenv/bin") {
		t.Errorf("pyenv: prefix %s", e.Prefix)
	}
}

func TestNvmAndLinks(t *testing.T) {
	h := newFakeHost(t)
	nv := h.path("home/u/.nvm/versions/node/v20.11.0")
	h.prog("home/u/.nvm/versions/node/v20.11.0/bin/node")
	h.prog("home/u/.nvm/versions/node/v20.11.0/lib/node_modules/npm/bin/npm-cli.js")
	h.link("home/u/.nvm/versions/node/v20.11.0/bin/npm", "../lib/node_modules/npm/bin/npm-cli.js")
	h.file("home/u/.nvm/nvm.sh", "", 0o644)
	// A link in the view to the user's node.
	h.link("usr/local/bin/node", nv+"/bin/node")
	h.setPath("home/u/.nvm/versions/node/v20.11.0/bin", "usr/local/bin")

	pl, err := h.resolve("", "node", "npm")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pl.Entries {
		if e.Prefix != nv || !e.Bound || e.PathDir != nv+"/bin" {
			t.Errorf("%s: %+v", e.Name, e)
		}
	}
	if got := pl.Binds(); !slices.Equal(got, []string{nv}) {
		t.Errorf("binds: %v", got)
	}
	if !strings.HasPrefix(pl.Path, nv+"/bin:") {
		t.Errorf("PATH %s", pl.Path)
	}

	// Found through the link in /usr/local/bin, node's prefix is still
	// nvm's version, where the link leads.
	h.setPath("usr/local/bin")
	if e := h.entry("node"); e.Prefix != nv || e.Found != h.path("usr/local/bin/node") || e.PathDir != nv+"/bin" {
		t.Errorf("node through a link: %+v", e)
	}
}

func TestRustup(t *testing.T) {
	h := newFakeHost(t)
	triple := "x86_64-unknown-linux-gnu"
	tc := h.path("home/u/.rustup/toolchains") + "/"
	h.prog("home/u/.cargo/bin/rustup")
	h.link("home/u/.cargo/bin/cargo", "rustup")
	if err := os.Link(h.path("home/u/.cargo/bin/rustup"), h.path("home/u/.cargo/bin/rustc")); err != nil {
		t.Fatal(err)
	}
	h.prog("home/u/.cargo/bin/rg") // cargo install ripgrep
	h.file("home/u/.cargo/credentials.toml", "[registry]\ntoken = \"x\"\n", 0o600)
	for _, name := range []string{"stable-" + triple, "nightly-" + triple} {
		h.prog("home/u/.rustup/toolchains/" + name + "/bin/cargo")
		h.prog("home/u/.rustup/toolchains/" + name + "/bin/rustc")
	}
	h.file("home/u/.rustup/settings.toml", "version = \"12\"\ndefault_host_triple = \""+triple+"\"\ndefault_toolchain = \"stable-"+triple+"\"\n\n[overrides]\n", 0o644)
	h.setPath("home/u/.cargo/bin")

	for _, name := range []string{"cargo", "rustc"} {
		e := h.entry(name)
		if e.Prefix != tc+"stable-"+triple || !e.Bound || e.Program != tc+"stable-"+triple+"/bin/"+name || e.PathDir != tc+"stable-"+triple+"/bin" {
			t.Errorf("%s (the default toolchain): %+v", name, e)
		}
	}
	// A rust-toolchain.toml names the channel; the host triple completes it.
	h.file("home/u/proj/rust-toolchain.toml", "[toolchain]\nchannel = \"nightly\"\ncomponents = [\"rustfmt\"]\n", 0o644)
	if e := h.entry("cargo"); e.Prefix != tc+"nightly-"+triple {
		t.Errorf("rust-toolchain.toml: %+v", e)
	}
	// A directory override beats the file; RUSTUP_TOOLCHAIN beats both.
	h.file("home/u/.rustup/settings.toml", "default_toolchain = \"stable-"+triple+"\"\n[overrides]\n\""+h.path("home/u")+"\" = \"stable-"+triple+"\"\n", 0o644)
	if e := h.entry("cargo"); e.Prefix != tc+"stable-"+triple || !strings.Contains(e.Via, "override") {
		t.Errorf("override: %+v", e)
	}
	h.env["RUSTUP_TOOLCHAIN"] = "1.70"
	if e := h.entry("cargo"); !strings.Contains(e.Missing, "rustup selects 1.70") {
		t.Errorf("RUSTUP_TOOLCHAIN=1.70, not installed: %+v", e)
	}
	delete(h.env, "RUSTUP_TOOLCHAIN")
	// A toolchain file cannot name a path.
	h.file("home/u/.rustup/settings.toml", "default_toolchain = \"stable\"\n", 0o644)
	h.file("home/u/proj/rust-toolchain", "../../../.ssh\n", 0o644)
	os.Remove(h.path("home/u/proj/rust-toolchain.toml"))
	if e := h.entry("cargo"); e.Missing == "" {
		t.Errorf("rust-toolchain ../../../.ssh: %+v", e)
	}
	// What cargo installed is its own program: only ~/.cargo/bin is
	// bound, never ~/.cargo with its registry token.
	if e := h.entry("rg"); e.Prefix != h.path("home/u/.cargo/bin") || !e.Bound {
		t.Errorf("rg: %+v", e)
	}
}

func TestGoAndView(t *testing.T) {
	h := newFakeHost(t)
	h.prog("usr/local/go/bin/go")
	h.prog("usr/bin/ls")
	h.setPath("usr/local/go/bin", "usr/bin")

	// In the view already: no bind, only the PATH entry the sandbox's
	// PATH lacks.
	pl, err := h.resolve("ls", "auto", "go")
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Entries) != 2 {
		t.Fatalf("entries: %+v", pl.Entries)
	}
	ls, goe := pl.Entries[0], pl.Entries[1]
	if !ls.Auto || ls.Prefix != h.path("usr") || ls.Bound {
		t.Errorf("ls (auto): %+v", ls)
	}
	if goe.Prefix != h.path("usr/local/go") || goe.Bound || goe.PathDir != h.path("usr/local/go/bin") {
		t.Errorf("go: %+v", goe)
	}
	if len(pl.Binds()) != 0 {
		t.Errorf("binds: %v", pl.Binds())
	}
	// The profile's PATH (the default) names the real /usr/bin, which
	// the fake view does not show: ls's directory goes first too.
	if want := h.path("usr/bin") + ":" + h.path("usr/local/go/bin") + ":" + profile.DefaultPath; pl.Path != want {
		t.Errorf("PATH %s, want %s", pl.Path, want)
	}

	// Out of the view, go's prefix is bound.
	os.Rename(h.path("usr"), h.path("sw"))
	h.setPath("sw/local/go/bin")
	if e := h.entry("go"); e.Prefix != h.path("sw/local/go") || !e.Bound {
		t.Errorf("go outside the view: %+v", e)
	}
}

func TestWorkspaceLinksNotFollowed(t *testing.T) {
	h := newFakeHost(t)
	h.prog("home/u/secret/bin/tool")
	// A link the sandbox could have planted in its workspace, on the PATH.
	h.link("home/u/proj/bin/python3", h.path("home/u/secret/bin/tool"))
	h.setPath("home/u/proj/bin")
	e := h.entry("python3")
	if e.Bound || e.Prefix != h.path("home/u/proj/bin") {
		t.Errorf("a link in the workspace was followed: %+v", e)
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name, prog, want string
		setup            func(h *fakeHost)
	}{
		{"program in a home", "home/u/tool", "is a home directory", nil},
		{"prefix holding a home", "data/bin/tool", "contains the home directory", func(h *fakeHost) { h.dir("data/home/v") }},
		{"a home's shared directory", "home/u/.local/tool", "is shared by the programs of", nil},
		{"credentials beside", "opt/tool/bin/tool", "holds .netrc, a store of credentials", func(h *fakeHost) { h.file("opt/tool/.netrc", "machine x password y\n", 0o600) }},
		{"credential store", "home/u/.ssh/bin/tool", "store of credentials (.ssh)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.prog(tc.prog)
			if tc.setup != nil {
				tc.setup(h)
			}
			h.setPath(filepath.Dir(tc.prog))
			_, err := h.resolve("", "go", "tool")
			var perr *profile.Error
			if !errors.As(err, &perr) {
				t.Fatalf("want a profile error, got %v", err)
			}
			if perr.File != "p.yaml" || perr.Line != 9 || perr.Col != 18 || perr.Field != "toolchains[1]" || !strings.Contains(perr.Msg, tc.want) {
				t.Errorf("got %s (line %d col %d field %s), want %q at p.yaml:9:18 toolchains[1]", perr, perr.Line, perr.Col, perr.Field, tc.want)
			}
			if !strings.HasPrefix(perr.Msg, "tool: resolves to "+h.path(tc.prog)) {
				t.Errorf("message does not say what resolved where: %s", perr.Msg)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	h := newFakeHost(t)
	h.setPath("usr/bin")
	pl, err := h.resolve("nosuch-cmd", "auto", "nosuch-tool")
	if err != nil {
		t.Fatal(err)
	}
	if w := pl.Warnings(); len(w) != 1 || w[0] != "p.yaml:9:20: toolchains[1]: nosuch-tool: found nowhere on the PATH cordon was started with; nothing is bound for it" {
		t.Errorf("warnings: %q", w)
	}
	if n := pl.Notes(); len(n) != 1 || !strings.Contains(n[0], "nosuch-cmd (auto): not bound") {
		t.Errorf("notes: %q", n)
	}
	if pl.Path != "" || len(pl.Binds()) != 0 {
		t.Errorf("a plan of nothing changes the sandbox: %+v", pl)
	}
	// A command given as a path is not looked up: the view shows that
	// file or not.
	h.prog("home/u/tool")
	if pl, err := h.resolve(h.path("home/u/tool"), "auto"); err != nil || len(pl.Entries) != 0 {
		t.Errorf("auto with a path: %+v, %v", pl, err)
	}
}

// A name given with --toolchain is reported as the flag's, not at a place
// in the profile.
func TestFlagToolchain(t *testing.T) {
	h := newFakeHost(t)
	h.prog("home/u/tool")
	h.setPath("home/u")
	p := profile.Default()
	for _, n := range []string{"nosuch-tool", "tool"} {
		if err := p.AddToolchain(n); err != nil {
			t.Fatal(err)
		}
	}
	host := Host{Getenv: h.getenv, Cwd: h.path("home/u/proj"), Homes: []string{h.path("home/u")}}
	_, err := Resolve(p, "", host)
	if err == nil || !strings.HasPrefix(err.Error(), "--toolchain tool: resolves to "+h.path("home/u/tool")) {
		t.Errorf("got %v", err)
	}
	p.Toolchains = p.Toolchains[:2]
	pl, err := Resolve(p, "", host)
	if err != nil {
		t.Fatal(err)
	}
	if w := pl.Warnings(); len(w) != 1 || w[0] != "--toolchain nosuch-tool: found nowhere on the PATH cordon was started with; nothing is bound for it" {
		t.Errorf("warnings: %q", w)
	}
}

func TestCompareVersions(t *testing.T) {
	got := []string{"3.12.10", "3.12.2", "3.12", "3.12.1", "3.12.1rc1", "3.9.1"}
	slices.SortFunc(got, compareVersions)
	want := []string{"3.9.1", "3.12", "3.12.1rc1", "3.12.1", "3.12.2", "3.12.10"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
