package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// With a host to resolve on, CL505 sees where the toolchains lead: out of
// the ceiling paths, or to a prefix cordon refuses.
func TestToolchainReachOnHost(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"opt/xc/bin/xc", "home/u/yc"} {
		f := filepath.Join(root, prog)
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"PATH": filepath.Join(root, "opt/xc/bin") + ":" + filepath.Join(root, "home/u")}
	host := toolchain.Host{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Cwd: root, Homes: []string{filepath.Join(root, "home/u")}}
	for _, tc := range []struct {
		name, toolchains, want string
	}{
		{"outside the ceiling", "[xc]", "xc binds " + filepath.Join(root, "opt/xc") + " on this host, outside the ceiling paths (/usr)"},
		{"refused", "[xc, yc]", "on this host yc: resolves to " + filepath.Join(root, "home/u/yc") + ", whose install prefix " + filepath.Join(root, "home/u") + " is a home directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "version: 1\nagent: a\ntoolchains: " + tc.toolchains + "\ngovernance:\n  ceilings:\n    paths: [/usr]\n"
			p, err := profile.Parse("p.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			c := &Context{Targets: []*Target{{Path: "p.yaml", Profile: p}}, Now: now, Toolchains: &host}
			var got []Finding
			for _, f := range Run(c) {
				if f.Code == "CL505" {
					got = append(got, f)
				}
			}
			if len(got) != 1 || !strings.Contains(got[0].Message, tc.want) || got[0].Line != 3 {
				t.Errorf("got %+v, want one CL505 on line 3: %s", got, tc.want)
			}
		})
	}
}
