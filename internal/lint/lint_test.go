package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// now is the day the fixtures are judged on.
var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

var host = probe.Host{Name: "test", Kernel: "6.1", Arch: "x86_64", LandlockABI: 6, Cgroup: "v2"}

var wantRe = regexp.MustCompile(`(?m)^# want: (CL\d+) (\S+)$`)

// lintFixture lints one fixture (a file, or a directory of them) as cordon
// lint would, in a copy: a NAME.approved.yaml beside a profile is approved
// first, as NAME.yaml, and the profile then takes its place; the CL801
// "good" fixture gets a fresh probe report.
func lintFixture(t *testing.T, fixture string) ([]Finding, map[string][]string) {
	t.Helper()
	dir := t.TempDir()
	saved := approval.StateDir
	approval.StateDir = func() string { return filepath.Join(dir, "approvals") }
	t.Cleanup(func() { approval.StateDir = saved })
	var files []string
	if fi, err := os.Stat(fixture); err == nil && fi.IsDir() {
		ents, _ := os.ReadDir(fixture)
		for _, e := range ents {
			files = append(files, filepath.Join(fixture, e.Name()))
		}
	} else {
		files = []string{fixture}
	}
	reports := filepath.Join(dir, "reports")
	wants := map[string][]string{}
	var args []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if approved, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".approved.yaml"); err == nil {
			os.WriteFile(dst, approved, 0o644)
			p, err := profile.LoadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := approval.Write(dst, p, "alice", now.Add(-24*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "CL801-good.yaml") {
			p, err := profile.LoadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			r := &probe.Report{Time: now.Add(-time.Hour), Host: host, ProfileSHA256: p.Hash(), Summary: probe.Summary{Total: 55, Contained: 55}}
			if _, err := r.Save(reports); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range wantRe.FindAllStringSubmatch(string(data), -1) {
			wants[dst] = append(wants[dst], m[1]+" "+m[2])
		}
		args = append(args, dst)
	}
	c, fs, err := Gather(args, reports)
	if err != nil {
		t.Fatal(err)
	}
	c.Now, c.Host = now, host
	return append(fs, Run(c)...), wants
}

// Every rule has a fixture that triggers it exactly where expected, and
// one that does not trigger it.
func TestRulesOnFixtures(t *testing.T) {
	fixtures, _ := filepath.Glob("testdata/lint/CL*")
	covered := map[string]bool{}
	for _, fx := range fixtures {
		name := filepath.Base(fx)
		if strings.HasSuffix(name, ".approved.yaml") {
			continue
		}
		code, kind, _ := strings.Cut(strings.TrimSuffix(name, ".yaml"), "-")
		t.Run(name, func(t *testing.T) {
			fs, wants := lintFixture(t, fx)
			switch {
			case strings.HasPrefix(kind, "bad"):
				covered[code+" bad"] = true
				n := 0
				for file, ws := range wants {
					data, _ := os.ReadFile(file)
					lines := strings.Split(string(data), "\n")
					for _, w := range ws {
						wcode, field, _ := strings.Cut(w, " ")
						if wcode != code {
							t.Errorf("fixture %s wants %s", name, wcode)
						}
						n++
						found := false
						for _, f := range fs {
							if f.Code == wcode && f.File == file && (f.Field == field || strings.HasPrefix(f.Field, field+".") || strings.HasPrefix(f.Field, field+"[")) {
								found = true
								key := field[strings.LastIndexAny(field, ".]")+1:]
								if f.Line < 1 || f.Line > len(lines) || (key != "" && !strings.Contains(lines[f.Line-1], key)) {
									t.Errorf("%s %s: reported at line %d: %q", wcode, field, f.Line, lineAt(lines, f.Line))
								}
								if f.Fix == "" || f.Message == "" {
									t.Errorf("%s: no message or fix: %+v", wcode, f)
								}
							}
						}
						if !found {
							t.Errorf("no %s at %s in %s; got %+v", wcode, field, filepath.Base(file), fs)
						}
					}
				}
				if got := countCode(fs, code); got != n {
					t.Errorf("%d findings of %s, want %d: %+v", got, code, n, fs)
				}
			case kind == "good":
				covered[code+" good"] = true
				if countCode(fs, code) != 0 {
					t.Errorf("%s reported on its good fixture: %+v", code, fs)
				}
			}
		})
	}
	for _, r := range Rules() {
		for _, kind := range []string{"bad", "good"} {
			if !covered[r.Code+" "+kind] {
				t.Errorf("rule %s (%s) has no %s fixture", r.Code, r.Name, kind)
			}
		}
	}
}

func countCode(fs []Finding, code string) int {
	n := 0
	for _, f := range fs {
		if f.Code == code {
			n++
		}
	}
	return n
}

func lineAt(lines []string, n int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}
