package toolchain

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// nvm lays out nvm's node version v with node and npm, and puts its bin
// directory on the PATH; it returns the version's directory.
func (h *fakeHost) nvm(v string) string {
	h.env["NVM_DIR"] = h.path("home/u/.nvm")
	h.prog("home/u/.nvm/versions/node/" + v + "/bin/node")
	h.prog("home/u/.nvm/versions/node/" + v + "/bin/npm")
	h.setPath("home/u/.nvm/versions/node/" + v + "/bin")
	return h.path("home/u/.nvm/versions/node/" + v)
}

// Credentials anywhere in a bound prefix are masked: files and
// directories by their names, what a credential's link leads to inside the
// prefix, another name (hard link) of a credential; and the run is told.
func TestCredentialsMasked(t *testing.T) {
	h := newFakeHost(t)
	nv := h.nvm("v20.11.0")
	rel := "home/u/.nvm/versions/node/v20.11.0/"
	h.file(rel+"etc/npmrc", "//registry.npmjs.org/:_authToken=npm_x\n", 0o600)
	h.file(rel+".npmrc", "_authToken=y\n", 0o600)
	h.file(rel+"lib/python3.11/pip.conf", "[global]\nindex-url = https://u:t@pkgs/simple\n", 0o600)
	h.file(rel+"share/doc/.ssh/id_rsa", "key", 0o600)
	// Not credentials: a package named credentials, a file named like one
	// elsewhere in its path.
	h.file(rel+"lib/docker/credentials/store.py", "", 0o644)
	h.file(rel+"lib/npmrc.js", "", 0o644)
	// A link named as credentials, to a file inside the prefix by another
	// name, and one to a file outside it.
	h.file(rel+"data/tok", "token", 0o600)
	h.link(rel+"lib/.netrc", "../data/tok")
	h.file("home/u/outside", "x", 0o600)
	h.link(rel+"lib/pip.ini", h.path("home/u/outside"))
	// Another name of a credential.
	if err := os.Link(h.path(rel+"etc/npmrc"), h.path(rel+"lib/copy")); err != nil {
		t.Fatal(err)
	}

	pl, err := h.plan("version: 1\nagent: a\ntoolchains: auto\n", []string{"bash", "-c", "node x; npm y"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".npmrc", "data/tok", "etc/npmrc", "lib/copy", "lib/python3.11/pip.conf", "share/doc/.ssh"}
	if got := pl.Masks(nv); !slices.Equal(got, want) {
		t.Errorf("masks %v, want %v", got, want)
	}
	if b := pl.Binds(); !slices.Equal(b, []string{nv}) {
		t.Errorf("binds %v", b)
	}
	bound := 0
	for _, e := range pl.Entries {
		if e.Name == "bash" { // not found here
			continue
		}
		bound++
		if !e.Bound || !slices.Equal(e.Masked, want) || !strings.Contains(e.String(), "credentials in it masked: .npmrc, data/tok, etc/npmrc") {
			t.Errorf("%s: %+v %s", e.Name, e, e)
		}
	}
	if bound != 2 {
		t.Errorf("entries %+v", pl.Entries)
	}
	// Told once for the prefix, on stderr (the warnings).
	var told []string
	for _, w := range pl.Warnings() {
		if strings.Contains(w, nv+" holds credentials") {
			told = append(told, w)
		}
	}
	if len(told) != 1 || !strings.Contains(told[0], "etc/npmrc") || !strings.Contains(told[0], "lib/python3.11/pip.conf") {
		t.Errorf("warnings %q", pl.Warnings())
	}
}

// A prefix with nothing to mask binds as before, without a word.
func TestNoCredentials(t *testing.T) {
	h := newFakeHost(t)
	nv := h.nvm("v20.11.0")
	h.file("home/u/.nvm/versions/node/v20.11.0/lib/node_modules/npm/index.js", "", 0o644)
	pl, err := h.plan("version: 1\nagent: a\ntoolchains: [node]\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Masks(nv)) != 0 || len(pl.Warnings()) != 0 || len(pl.Entries[0].Masked) != 0 {
		t.Errorf("masks %v, warnings %q", pl.Masks(nv), pl.Warnings())
	}
}

// A prefix that cannot be searched whole is not bound: a name the profile
// lists is refused at its field; a name a script gives is left out, with a
// warning.
func TestPrefixTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, h *fakeHost, rel string)
		want  string
	}{
		{"entries", func(t *testing.T, h *fakeHost, rel string) {
			old := maxPrefixEntries
			maxPrefixEntries = 20
			t.Cleanup(func() { maxPrefixEntries = old })
			for i := range 30 {
				h.file(rel+"lib/f"+strings.Repeat("x", i), "", 0o644)
			}
		}, "holds more than 20 files and directories"},
		{"depth", func(t *testing.T, h *fakeHost, rel string) {
			h.dir(rel + "lib" + strings.Repeat("/d", maxPrefixDepth))
		}, "is deeper than 64 directories"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.nvm("v20.11.0")
			tc.setup(t, h, "home/u/.nvm/versions/node/v20.11.0/")
			_, err := h.plan("version: 1\nagent: a\ntoolchains: [node]\n", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cordon binds only a prefix it has searched whole") {
				t.Errorf("profile's name: %v", err)
			}
			pl, err := h.plan("version: 1\nagent: a\ntoolchains: auto\n", []string{"sh", "-c", "node x"})
			if err != nil {
				t.Fatal(err)
			}
			if len(pl.Binds()) != 0 || len(pl.Entries) != 1 || pl.Entries[0].Name != "sh" || len(pl.Warnings()) != 1 || !strings.Contains(pl.Warnings()[0], "nothing is bound for it") {
				t.Errorf("script's name: binds %v, entries %+v, warnings %q", pl.Binds(), pl.Entries, pl.Warnings())
			}
		})
	}
}
