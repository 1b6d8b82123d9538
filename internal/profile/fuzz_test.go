package profile

import (
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// FuzzParse checks that any input either yields a valid profile that survives
// a round trip through YAML, or located errors; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(defaultYAML)
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "mounts:\n  - path: /usr\n    target: /x\n    writable: true\n"))
	f.Add([]byte(minimal + "resources:\n  tmp_size: 1.5GiB\n"))
	f.Add([]byte(minimal + "env:\n  set: {A: b}\n  pass: [TERM]\n"))
	f.Add([]byte("version: 1\nagent: [\n"))
	f.Add([]byte("---\nversion: 1\n---\nagent: a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error is not a located profile error: %T %v", err, err)
			}
			for _, e := range errs {
				if e.File != "fuzz.yaml" || e.Msg == "" || e.Line < 0 || e.Col < 0 {
					t.Fatalf("malformed error %#v", e)
				}
			}
			return
		}
		if p.Version != Version || p.User.UID < 1 || p.User.GID < 1 || p.Resources.TmpSize.N < 1<<20 {
			t.Fatalf("invalid profile accepted: %+v", p)
		}
		for _, m := range p.Mounts {
			if TargetProblem(m.Dest()) != "" || hostPathProblem(m.Path) != "" {
				t.Fatalf("bad mount accepted: %+v", m)
			}
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		q, err := Parse("again.yaml", out)
		if err != nil {
			t.Fatalf("round trip of\n%s\nfailed: %v", out, err)
		}
		if q.Agent != p.Agent || len(q.Mounts) != len(p.Mounts) || !sameLimits(&q.Resources, &p.Resources) {
			t.Fatalf("round trip changed the profile:\n%s", strings.TrimSpace(string(out)))
		}
	})
}

func sameLimits(a, b *Resources) bool {
	for _, l := range Limits {
		if a.Get(l.Name).String() != b.Get(l.Name).String() {
			return false
		}
	}
	return true
}
