package profile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

func TestToolchainsField(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want Toolchains
	}{
		{"toolchains: auto\n", Toolchains{"auto"}},
		{"toolchains: [auto, python3, g++, python3.12, x86_64-linux-gnu-gcc]\n", Toolchains{"auto", "python3", "g++", "python3.12", "x86_64-linux-gnu-gcc"}},
		{"toolchains:\n  - go\n", Toolchains{"go"}},
	} {
		p, err := Parse("p.yaml", []byte(minimal+tc.src))
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if !slices.Equal(p.Toolchains, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.src, p.Toolchains, tc.want)
		}
		// It survives a round trip, as profile show prints it.
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse("again.yaml", out)
		if err != nil || !slices.Equal(q.Toolchains, tc.want) {
			t.Errorf("%q round trip: %v, %q", tc.src, err, q.Toolchains)
		}
	}
	if !Default().Toolchains.HasAuto() {
		t.Error("the default profile does not bind the command's toolchain")
	}
}

func TestToolchainsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src   string
		line, col   int
		field, want string
	}{
		{"a word other than auto", "toolchains: python3\n", 3, 13, "toolchains", `"python3": want a list of command names, such as [python3], or auto`},
		{"a mapping", "toolchains: {go: true}\n", 3, 13, "toolchains", "sequence"},
		{"a mapping in the list", "toolchains:\n  - {name: go}\n", 4, 5, "toolchains[0]", "want a string, found a mapping"},
		{"a path", "toolchains: [go, /usr/bin/python3]\n", 3, 18, "toolchains[1]", "is a path"},
		{"not a name", "toolchains: [go, 'py thon']\n", 3, 18, "toolchains[1]", "not a command name"},
		{"empty", "toolchains: [go, '']\n", 3, 18, "toolchains[1]", "empty"},
		{"twice", "toolchains: [go, auto, go]\n", 3, 24, "toolchains[2]", "go is listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(minimal+tc.src))
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("want one located error, got %v", err)
			}
			e := errs[0]
			if e.File != "p.yaml" || e.Line != tc.line || e.Col != tc.col || e.Field != tc.field || !strings.Contains(e.Msg, tc.want) {
				t.Errorf("got %s (%d:%d %s), want %d:%d %s: ...%s...", e, e.Line, e.Col, e.Field, tc.line, tc.col, tc.field, tc.want)
			}
		})
	}
}

func TestAddToolchain(t *testing.T) {
	p := Default()
	for _, name := range []string{"go", "python3", "go"} {
		if err := p.AddToolchain(name); err != nil {
			t.Fatal(err)
		}
	}
	if want := (Toolchains{"auto", "go", "python3"}); !slices.Equal(p.Toolchains, want) {
		t.Errorf("got %q, want %q", p.Toolchains, want)
	}
	for _, bad := range []string{"/usr/bin/go", "a b", ""} {
		if err := p.AddToolchain(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
