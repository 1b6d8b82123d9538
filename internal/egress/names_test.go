package egress

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSafeName(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"api.github.com", "api.github.com"},
		{"\x1b[2J\x1b[31mevil\nname\r", `\x1b[2J\x1b[31mevil\x0aname\x0d`},
		{"tab\there\x7f", `tab\x09here\x7f`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"rtl\u202eoverride", `rtl\u202eoverride`},
		{"c1\u009bcontrol", `c1\u009bcontrol`},
		{`back\slash "quoted"`, `back\\slash \"quoted\"`},
		{"ünïcode.example", "ünïcode.example"},
	} {
		if got := safeName(tt.in); got != tt.want {
			t.Errorf("safeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{
		strings.Repeat("a", 300),
		strings.Repeat("\x1b", 300),
		strings.Repeat("é", 200),
		strings.Repeat("a", 254) + "\n",
	} {
		got := safeName(in)
		if len(got) > maxShownName || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
			t.Errorf("safeName of %d bytes: %d bytes %q", len(in), len(got), got)
		}
		for _, c := range []byte(got) {
			if c < 0x20 || c == 0x7f {
				t.Errorf("a control character in %q", got)
			}
		}
	}
	if got := safeName(strings.Repeat("a", 255)); got != strings.Repeat("a", 255) {
		t.Errorf("a name of 255 bytes was cut: %q", got)
	}
}

func FuzzSafeName(f *testing.F) {
	f.Add("\x1b]0;title\x07")
	f.Add(strings.Repeat("\xff", 100))
	f.Fuzz(func(t *testing.T, s string) {
		got := safeName(s)
		if len(got) > maxShownName || !utf8.ValidString(got) {
			t.Fatalf("%q: %q", s, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
				t.Fatalf("%q: control character in %q", s, got)
			}
		}
	})
}

func TestValidName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"api.github.com", true},
		{"API.GitHub.com.", true},
		{"_srv.example.org", true},
		{"localhost", true},
		{"", false},
		{".", false},
		{"a..b", false},
		{"evil\x1b.example.com", false},
		{"sp ace.example", false},
		{strings.Repeat("a", 64) + ".com", false},
		{strings.Repeat("a.", 127) + "a", false},
	} {
		if got := validName(tt.name); got != tt.ok {
			t.Errorf("validName(%q) = %v", tt.name, got)
		}
	}
}
