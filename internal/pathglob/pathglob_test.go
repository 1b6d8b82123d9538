package pathglob

import "testing"

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
