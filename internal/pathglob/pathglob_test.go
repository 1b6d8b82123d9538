package pathglob

import (
	"path"
	"strings"
	"testing"
)

func TestMatchFile(t *testing.T) {
	ws := "/work/app"
	for _, tt := range []struct {
		pattern, path string
		want          bool
	}{
		{"**/.env*", "/work/app/.env", true},
		{"**/.env*", "/work/app/.env.production", true},
		{"**/.env*", "/work/app/deploy/.env.local", true},
		{"**/.env*", "/root/.env", true}, // ** stands for any directory
		{"**/.env*", "/work/app/env", false},
		{"**/.env*", "/work/app/.envoy/x", false},
		{"**/.ssh/**", "/work/app/.ssh/id_rsa", true},
		{"**/.ssh/**", "/root/.ssh/id_rsa", true},
		{"**/.ssh/**", "/work/app/ssh/id_rsa", false},
		{"**/*.pem", "/work/app/certs/a/key.pem", true},
		{"**/*.pem", "/work/app/key.pem", true},
		{"**/*.pem", "/work/app/key.pem.txt", false},
		{"secrets/**", "/work/app/secrets/a/b", true},
		{"secrets/**", "/work/app/secrets", true},
		{"secrets/**", "/other/secrets/a", false},
		{"secrets/*", "/work/app/secrets/a/b", false},
		{"/etc/**", "/etc/shadow", true},
		{"/etc/*", "/etc/ssl/x", false},
		{"/etc/**", "/work/app/etc/x", false},
		{"a**b", "/work/app/ab", false}, // refused by Check: matches nothing
		{"[", "/work/app/[", false},
	} {
		if got := MatchFile(tt.pattern, tt.path, ws); got != tt.want {
			t.Errorf("%s on %s: got %v", tt.pattern, tt.path, got)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, p := range []string{"**/.env*", "/etc/**", "*.pem", "a/[bc]/d"} {
		if err := Check(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"", "a//b", "a/", "./a", "a/../b", "a**", "a/[b", "/x/."} {
		if err := Check(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		p, dir, rel string
		ok          bool
	}{
		{"/w/notes/a", "/w/notes", "a", true},
		{"/w/notes", "/w/notes", "", true},
		{"/w/notes-evil/a", "/w/notes", "", false},
		{"/w/x", "/", "w/x", true},
		{"w/x", "/", "", false},
	} {
		rel, ok := Within(tt.p, tt.dir)
		if rel != tt.rel || ok != tt.ok {
			t.Errorf("%s in %s: %q %v", tt.p, tt.dir, rel, ok)
		}
	}
}

// splitMatch is Match as names split into slices: Match must agree with it
// on every pattern and name, the empty names of "" and "/" included.
func splitMatch(pattern, name string) bool {
	if Check(pattern) != nil || strings.HasPrefix(pattern, "/") != strings.HasPrefix(name, "/") {
		return false
	}
	var m func(pat, names []string) bool
	m = func(pat, names []string) bool {
		for len(pat) > 0 {
			if pat[0] == "**" {
				for i := 0; i <= len(names); i++ {
					if m(pat[1:], names[i:]) {
						return true
					}
				}
				return false
			}
			if len(names) == 0 {
				return false
			}
			if ok, _ := path.Match(pat[0], names[0]); !ok {
				return false
			}
			pat, names = pat[1:], names[1:]
		}
		return len(names) == 0
	}
	return m(strings.Split(strings.TrimPrefix(pattern, "/"), "/"), strings.Split(strings.TrimPrefix(name, "/"), "/"))
}

func TestMatchAgreesWithSplit(t *testing.T) {
	patterns := []string{"/", "*", "/*", "**", "/**", "a", "a/*", "**/a", "a/**", "a/**/b", "**/.env*", "/root/**", "*/*", "?", "[a-c]", "**/**", "a/**/**/b", "/a/*/c"}
	names := []string{"", "/", "a", "/a", "a/b", "a/x/b", "a/b/", "/a/b/c", ".env", "d/.env.local", "b", "abc", "a//b", "/root/.ssh/id", "a/a/b/b"}
	for _, p := range patterns {
		for _, n := range names {
			if got, want := Match(p, n), splitMatch(p, n); got != want {
				t.Errorf("Match(%q, %q) = %v, want %v", p, n, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(10, func() { Match("**/.env*", "deploy/config/.env.production") }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}
