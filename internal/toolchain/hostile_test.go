package toolchain

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// plan resolves the toolchains of the profile src for a run of argv, cwd
// the project, with the given homes.
func (h *fakeHost) plan(src string, argv []string, homes ...string) (*Plan, error) {
	h.t.Helper()
	p, err := profile.Parse("p.yaml", []byte(src))
	if err != nil {
		h.t.Fatal(err)
	}
	if homes == nil {
		homes = []string{h.path("home/u")}
	}
	return ResolveRun(p, argv, Host{Getenv: h.getenv, Cwd: h.path("home/u/proj"), Homes: homes})
}

// mentions reports whether any entry, note or warning of pl says s.
func mentions(pl *Plan, s string) bool {
	for _, e := range pl.Entries {
		if strings.Contains(e.String(), s) || strings.Contains(e.Via, s) || strings.Contains(e.Missing, s) {
			return true
		}
	}
	for _, n := range append(pl.Notes(), pl.Warnings()...) {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// A link the sandbox can write, anywhere in the chain from what the PATH
// finds to the program, ends the chain: what it points to is never bound.
func TestWritableHopEndsChain(t *testing.T) {
	ws := func(h *fakeHost, path string) string {
		return "version: 1\nagent: a\nworkspace:\n  path: " + path + "\n  writable: true\ntoolchains: [mytool]\n"
	}
	for _, tc := range []struct {
		name  string
		setup func(h *fakeHost) string // returns the profile
	}{
		{"a user's link into the workspace", func(h *fakeHost) string {
			h.link("home/u/.local/bin/mytool", h.path("home/u/proj/tool/mytool.sh"))
			h.link("home/u/proj/tool/mytool.sh", h.path("home/u/work/secretrepo/bin/deploy"))
			h.setPath("home/u/.local/bin")
			return ws(h, h.path("home/u/proj"))
		}},
		{"the workspace on the PATH by a linked name", func(h *fakeHost) string {
			h.link("wsl", h.path("home/u/proj"))
			h.link("home/u/proj/bin/mytool", h.path("home/u/work/secretrepo/bin/deploy"))
			h.setPath("wsl/bin")
			return ws(h, h.path("home/u/proj"))
		}},
		{"the workspace given by a linked name", func(h *fakeHost) string {
			h.link("wsl", h.path("home/u/proj"))
			h.link("home/u/proj/bin/mytool", h.path("home/u/work/secretrepo/bin/deploy"))
			h.setPath("home/u/proj/bin")
			return ws(h, h.path("wsl"))
		}},
		{"a writable mount shown elsewhere", func(h *fakeHost) string {
			h.link("home/u/.local/bin/mytool", h.path("scratch/mytool"))
			h.link("scratch/mytool", h.path("home/u/work/secretrepo/bin/deploy"))
			h.setPath("home/u/.local/bin")
			return ws(h, h.path("home/u/proj")) + "mounts:\n  - path: " + h.path("scratch") + "\n    target: /scratch\n    writable: true\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.prog("home/u/work/secretrepo/bin/deploy")
			h.file("home/u/work/secretrepo/notes.txt", "secret", 0o600)
			pl, err := h.plan(tc.setup(h), nil)
			if err != nil {
				t.Fatal(err)
			}
			if b := pl.Binds(); len(b) != 0 {
				t.Errorf("binds %v, want none", b)
			}
			if len(pl.Entries) != 1 || pl.Entries[0].Bound || !pl.Entries[0].Own || strings.Contains(pl.Entries[0].Prefix, "secretrepo") {
				t.Errorf("entries %+v", pl.Entries)
			}
			if strings.Contains(pl.Path, "secretrepo") || !strings.Contains(pl.Entries[0].String(), "the sandbox's own file") {
				t.Errorf("PATH %s, entry %s", pl.Path, pl.Entries[0])
			}
		})
	}
}

// A version file is read only as a regular file of its own, never through
// a link, and what it says is shown only when it is a version name.
func TestVersionFilesNotFollowed(t *testing.T) {
	h := newFakeHost(t)
	h.pyenv("3.11.7", "3.12.1")
	h.file("home/u/.pyenv/version", "3.11.7\n", 0o644)
	h.file("home/u/.ssh/id_ed25519", "SECRETKEY\n", 0o600)
	h.setPath("home/u/.pyenv/shims")
	v := h.path("home/u/.pyenv/versions/")

	h.link("home/u/proj/.python-version", h.path("home/u/.ssh/id_ed25519"))
	pl, err := h.resolve("", "python3")
	if err != nil {
		t.Fatal(err)
	}
	if mentions(pl, "SECRETKEY") || pl.Entries[0].Prefix != v+"/3.11.7" {
		t.Errorf("a linked .python-version was read: %+v", pl.Entries[0])
	}

	// Not a version name: neither shown nor followed.
	os.Remove(h.path("home/u/proj/.python-version"))
	h.file("home/u/proj/.python-version", "\x1b]0;pwned\x07\n", 0o644)
	pl, err = h.resolve("", "python3")
	if err != nil {
		t.Fatal(err)
	}
	e := pl.Entries[0]
	if mentions(pl, "pwned") || mentions(pl, "\x1b") || !strings.Contains(e.Missing, "the version named in "+h.path("home/u/proj/.python-version")+" is not a valid version name") {
		t.Errorf("an invalid version name: %+v", e)
	}
	// A name too long is not one either.
	h.file("home/u/proj/.python-version", strings.Repeat("3", 200)+"\n", 0o644)
	if pl, _ := h.resolve("", "python3"); mentions(pl, strings.Repeat("3", 100)) {
		t.Errorf("a long version name was shown: %+v", pl.Entries[0])
	}

	// Nor for rustup's files.
	h.prog("home/u/.cargo/bin/rustup")
	h.link("home/u/.cargo/bin/cargo", "rustup")
	h.prog("home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo")
	h.file("home/u/.rustup/settings.toml", "default_toolchain = \"stable-x86_64-unknown-linux-gnu\"\n", 0o644)
	h.setPath("home/u/.cargo/bin")
	for _, f := range []string{"rust-toolchain", "rust-toolchain.toml"} {
		h.link("home/u/proj/"+f, h.path("home/u/.ssh/id_ed25519"))
		pl, err := h.resolve("", "cargo")
		if err != nil {
			t.Fatal(err)
		}
		if mentions(pl, "SECRETKEY") || !strings.HasSuffix(pl.Entries[0].Prefix, "stable-x86_64-unknown-linux-gnu") {
			t.Errorf("a linked %s was read: %+v", f, pl.Entries[0])
		}
		os.Remove(h.path("home/u/proj/" + f))
	}
	h.file("home/u/proj/rust-toolchain", "\x1b[2Jnightly\n", 0o644)
	pl, err = h.resolve("", "cargo")
	if err != nil {
		t.Fatal(err)
	}
	if mentions(pl, "\x1b") || !strings.Contains(pl.Entries[0].Missing, "is not a valid toolchain name") {
		t.Errorf("an invalid toolchain name: %+v", pl.Entries[0])
	}
}

// Version files in a directory others may write to, or owned by another
// user, are not read.
func TestVersionFilesOfOthers(t *testing.T) {
	h := newFakeHost(t)
	h.pyenv("3.11.7", "3.12.1")
	h.file("home/u/.pyenv/version", "3.11.7\n", 0o644)
	h.setPath("home/u/.pyenv/shims")
	v := h.path("home/u/.pyenv/versions/")

	h.file("home/u/.python-version", "3.12.1\n", 0o644)
	if e := h.entry("python3"); e.Prefix != v+"/3.12.1" {
		t.Fatalf("the parent's version file: %+v", e)
	}
	if err := os.Chmod(h.path("home/u"), 0o777); err != nil {
		t.Fatal(err)
	}
	if e := h.entry("python3"); e.Prefix != v+"/3.11.7" {
		t.Errorf("a version file in a directory anyone may write to was read: %+v", e)
	}
	if err := os.Chmod(h.path("home/u"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	if err := os.Lchown(h.path("home/u/.python-version"), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if e := h.entry("python3"); e.Prefix != v+"/3.11.7" {
		t.Errorf("another user's version file was read: %+v", e)
	}
}

// A version file that is a FIFO is not opened for reading, which would
// wait for a writer forever.
func TestFifoVersionFiles(t *testing.T) {
	h := newFakeHost(t)
	h.pyenv("3.11.7")
	h.file("home/u/.pyenv/version", "3.11.7\n", 0o644)
	h.setPath("home/u/.pyenv/shims")
	for _, f := range []string{"home/u/proj/.python-version", "home/u/proj/rust-toolchain", "home/u/.rustup/settings.toml"} {
		h.dir(filepath.Dir(f))
		if err := syscall.Mkfifo(h.path(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if e := h.entry("python3"); e.Prefix != h.path("home/u/.pyenv/versions/3.11.7") {
		t.Errorf("python3 with a FIFO .python-version: %+v", e)
	}
	h.prog("home/u/.cargo/bin/rustup")
	h.link("home/u/.cargo/bin/cargo", "rustup")
	h.prog("home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo")
	h.setPath("home/u/.cargo/bin")
	h.env["RUSTUP_TOOLCHAIN"] = ""
	if e := h.entry("cargo"); e.Missing == "" {
		t.Errorf("cargo with FIFOs for rustup's files: %+v", e)
	}
}

// A program a script names is bound only from a toolchain's install: the
// agent writes the script, and may name any program on the PATH.
func TestScriptNamesBindOnlyToolchains(t *testing.T) {
	h := newFakeHost(t)
	h.pyenv("3.11.7")
	h.file("home/u/.pyenv/version", "3.11.7\n", 0o644)
	h.prog("home/u/dotfiles/bin/gs")
	h.file("home/u/dotfiles/git/gitconfig.local", "token", 0o600)
	h.prog("home/u/tools/tool")
	h.setPath("home/u/.pyenv/shims", "home/u/dotfiles/bin", "home/u/tools")
	src := "version: 1\nagent: a\nworkspace:\n  path: " + h.path("home/u/proj") + "\n  writable: true\ntoolchains: auto\n"
	argv := []string{"bash", "-c", "gs; tool; cat ~/dotfiles/git/gitconfig.local; python3 -V"}
	pl, err := h.plan(src, argv)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pl.Binds(), []string{h.path("home/u/.pyenv/versions/3.11.7")}; !slices.Equal(got, want) {
		t.Errorf("binds %v, want %v", got, want)
	}
	// A toolchain installed for the whole host is bound for a script.
	defer func(roots []string) { toolchainRoots = roots }(toolchainRoots)
	toolchainRoots = []string{h.path("opt")}
	h.prog("opt/node/bin/node")
	h.prog("opt/bin/optool")
	h.env["PATH"] += ":" + h.path("opt/node/bin") + ":" + h.path("opt/bin")
	// (A shell gets the toolchains it may run besides: python3's.)
	pl, err = h.plan(src, []string{"bash", "-c", "node x; optool"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pl.Binds(), []string{h.path("home/u/.pyenv/versions/3.11.7"), h.path("opt/node")}; !slices.Equal(got, want) {
		t.Errorf("binds %v, want %v", got, want)
	}
	// Named by the profile, gs is the user's choice, and bound.
	pl, err = h.plan(strings.Replace(src, "toolchains: auto", "toolchains: [auto, gs]", 1), argv)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pl.Binds(), []string{h.path("home/u/.pyenv/versions/3.11.7"), h.path("home/u/dotfiles"), h.path("opt/node")}; !slices.Equal(got, want) {
		t.Errorf("binds %v, want %v", got, want)
	}
	// A shell reading its script from its input, a file or a terminal gets
	// the same toolchains as its commands would; anything else of the
	// PATH stays out.
	for _, argv := range [][]string{{"bash", "-s"}, {"sh"}, {"bash", "script.sh"}, {"zsh", "-i"}} {
		pl, err = h.plan(src, argv)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pl.Binds(), []string{h.path("home/u/.pyenv/versions/3.11.7"), h.path("opt/node")}; !slices.Equal(got, want) {
			t.Errorf("%v: binds %v, want %v", argv, got, want)
		}
	}
	// Not a shell: only its own toolchain.
	pl, err = h.plan(src, []string{"node", "x.js"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pl.Binds(), []string{h.path("opt/node")}; !slices.Equal(got, want) {
		t.Errorf("node: binds %v, want %v", got, want)
	}
}

// A home, or a directory shared by a home's programs, reached through a
// link is still one.
func TestHomeThroughLink(t *testing.T) {
	h := newFakeHost(t)
	h.dir("home/w")
	h.link("hl", h.path("home/w"))
	h.prog("home/w/.local/bin/tool")
	h.prog("home/w/tool2")
	src := "version: 1\nagent: a\ntoolchains: [tool]\n"
	h.setPath("hl/.local/bin")
	pl, err := h.plan(src, nil, h.path("hl"))
	if err != nil {
		t.Fatal(err)
	}
	if e := pl.Entries[0]; e.Prefix != h.path("home/w/.local/bin") {
		t.Errorf("~/.local through a linked home: %+v", e)
	}
	h.setPath("hl")
	if _, err := h.plan("version: 1\nagent: a\ntoolchains: [tool2]\n", nil, h.path("hl")); err == nil || !strings.Contains(err.Error(), "is a home directory") {
		t.Errorf("a linked home: got %v", err)
	}
	// CARGO_HOME by a linked name.
	h.prog("cargo/bin/rg")
	h.link("cl", h.path("cargo"))
	h.env["CARGO_HOME"] = h.path("cl")
	h.setPath("cl/bin")
	pl, err = h.plan("version: 1\nagent: a\ntoolchains: [rg]\n", nil, h.path("hl"))
	if err != nil {
		t.Fatal(err)
	}
	if e := pl.Entries[0]; e.Prefix != h.path("cargo/bin") {
		t.Errorf("rg in a linked CARGO_HOME: %+v", e)
	}
	// A home's store of credentials that a link leads elsewhere.
	h.prog("secure/ssh/bin/tool3")
	h.link("home/w/.ssh", h.path("secure/ssh"))
	h.setPath("secure/ssh/bin")
	if _, err := h.plan("version: 1\nagent: a\ntoolchains: [tool3]\n", nil, h.path("hl")); err == nil || !strings.Contains(err.Error(), "store of credentials (.ssh") {
		t.Errorf("a linked ~/.ssh: got %v", err)
	}
}

// The PATH gets a directory only where it finds the name.
func TestPathDirHoldsName(t *testing.T) {
	h := newFakeHost(t)
	h.prog("home/u/tools/mt/mytool.sh")
	h.link("home/u/.local/bin/mytool", h.path("home/u/tools/mt/mytool.sh"))
	h.setPath("home/u/.local/bin")
	pl, err := h.resolve("", "mytool")
	if err != nil {
		t.Fatal(err)
	}
	e := pl.Entries[0]
	if e.Prefix != h.path("home/u/tools/mt") || !e.Bound || e.PathDir != "" || strings.Contains(pl.Path, "tools/mt") ||
		e.NoPath != "not put on PATH: "+h.path("home/u/tools/mt")+" has no mytool; the sandbox runs it by its path only" {
		t.Errorf("mytool -> mytool.sh: %+v, PATH %s", e, pl.Path)
	}
}
