package obey_test

import (
	"testing"

	"github.com/cordon-sandbox/cordon/internal/obey"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Profiles that profile.Parse (and so `cordon run --profile`) accepts
// though their top-level node is not a plain mapping in the AST (an anchor
// on the document's mapping; a merge key supplying version and agent) are
// known by obey.Content, and so is an approval record with a top-level
// anchor, which approval.load accepts.
func TestAttackContentMissesParsedProfiles(t *testing.T) {
	for name, y := range map[string]string{
		"anchor on the top mapping":        "&a\nversion: 1\nagent: evil\n",
		"anchor after the document marker": "--- &a\nversion: 1\nagent: evil\n",
		"merge key":                        "<<: {version: 1, agent: evil}\n",
	} {
		if _, err := profile.Parse("p.yaml", []byte(y)); err != nil {
			t.Fatalf("%s: the profile loader refuses it: %v", name, err)
		}
		if obey.Content([]byte(y)) == nil {
			t.Errorf("%s: profile.Parse accepts %q but obey.Content does not know it as a profile", name, y)
		}
	}
	record := "&r\nagent: b\nprofile_sha256: \"0000\"\napproved_by: sec\napproved_at: 2026-01-01T00:00:00Z\nprofile: {version: 1, agent: b}\n"
	if obey.Content([]byte(record)) == nil {
		t.Errorf("an approval record with a top-level anchor is not known by obey.Content")
	}
}

// Files host tools run or obey from a project: rust-toolchain.toml
// `[toolchain] path = "./tc"` makes rustup's cargo/rustc proxies run
// ./tc/bin/cargo; opencode starts the local MCP servers of opencode.json
// and .opencode/ on start.
func TestAttackCatalogGaps(t *testing.T) {
	for _, rel := range []string{
		"rust-toolchain.toml", "rust-toolchain", "sub/rust-toolchain.toml",
		"opencode.json", "opencode.jsonc", ".opencode/opencode.json",
	} {
		if obey.Match(rel) == nil {
			t.Errorf("obey.Match(%q) = nil", rel)
		}
	}
}
