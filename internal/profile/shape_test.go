package profile

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// errorLines parses src and returns its errors as "line:col field: msg".
func errorLines(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse("p.yaml", []byte(src))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v, want profile errors", err)
	}
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%d:%d %s: %s", e.Line, e.Col, e.Field, e.Msg))
	}
	return out
}

// threeMistakes has a misspelt field, a misspelt block and a bad limit.
const threeMistakes = `version: 1
agent: demo
workspace:
  path: .
  writeable: true
resouces:
  memory: 1GiB
network:
  budget:
    bytes_out: lots
`

// wrongTypes has values of the wrong type among other mistakes.
const wrongTypes = `version: 1
agent: demo
user:
  uid: abc
mounts:
  - /usr
  - path: /opt
    pth: /srv
    writable: maybe
  - path: relative
hostname: [a]
`

// misspelt are profiles whose only mistakes are misspelt fields.
var misspelt = []string{
	"version: 1\nagnet: demo\n",
	minimal + "mounts:\n  - zzz: 1\n    path: /usr\n",
	minimal + "x-base: &b {pth: /usr}\nmounts:\n  - <<: *b\n    target: /opt\n",
}

func TestParseReportsEveryMistakeInOnePass(t *testing.T) {
	src := threeMistakes
	want := []string{
		`5:3 workspace.writeable: unknown field "writeable"; did you mean "writable"?`,
		`6:1 resouces: unknown field "resouces"; did you mean "resources"?`,
		`10:16 network.budget.bytes_out: "lots" is not a size (write e.g. 512MiB, 1.5GiB or a number of bytes)`,
	}
	if diff := cmp.Diff(want, errorLines(t, src)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestParseReportsWrongTypesWithTheRest(t *testing.T) {
	src := wrongTypes
	want := []string{
		`4:8 user.uid: want a whole number, found a string`,
		`6:5 mounts[0]: want a mapping, found a string`,
		`8:5 mounts[1].pth: unknown field "pth"; did you mean "path"?`,
		`9:15 mounts[1].writable: want true or false, found a string`,
		`10:11 mounts[2].path: "relative" must be an absolute path`,
		`11:11 hostname: want a string, found a list`,
	}
	if diff := cmp.Diff(want, errorLines(t, src)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestMisspeltFieldIsNotAlsoMissing(t *testing.T) {
	want := []string{`2:1 agnet: unknown field "agnet"; did you mean "agent"?`}
	if diff := cmp.Diff(want, errorLines(t, misspelt[0])); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestUnknownFieldWithoutSuggestionListsTheFields(t *testing.T) {
	want := []string{`4:5 mounts[0].zzz: unknown field "zzz"; the fields here are path, target, writable, optional, reason`}
	if diff := cmp.Diff(want, errorLines(t, misspelt[1])); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestAnchorsAndMergeKeysStillLoad(t *testing.T) {
	src := minimal + `mounts:
  - &ro {path: /usr}
  - <<: *ro
    target: /opt/usr
resources: &res
  memory: 1GiB
`
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Mounts) != 2 || p.Mounts[1].Path != "/usr" || p.Mounts[1].Target != "/opt/usr" {
		t.Errorf("mounts: %+v", p.Mounts)
	}
	// A misspelling inside a merged mapping is found there too.
	got := errorLines(t, misspelt[2])
	if len(got) != 2 || got[1] != `3:13 mounts[0].pth: unknown field "pth"; did you mean "path"?` {
		t.Errorf("got %q", got)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"path", "target", "writable", "optional", "reason", "cpu_time", "resources"}
	for key, want := range map[string]string{
		"writeable": "writable", "resouces": "resources", "pth": "path", "taget": "target",
		"trget": "target", "cpuTime": "cpu_time", "cpu-time": "cpu_time", "optinoal": "optional",
		"zzz": "", "label": "", "rw": "",
	} {
		if got := Suggest(key, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// A value of the wrong type comes with how to write it: a string where a
// mapping is wanted as that mapping, a value where a list is, a mapping
// where one value is.
func TestWrongTypeFix(t *testing.T) {
	_, err := Parse("p.yaml", []byte(`version: 1
agent: demo
network:
  allow:
    - example.com:443
mounts: /usr
hostname:
  a: b
`))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v, want profile errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Field+": "+e.Fix)
	}
	want := []string{
		"network.allow[0]: write each entry as a mapping, such as: - dest: example.com:443",
		"mounts: write it as a list of mappings, such as: - path: /usr",
		"hostname: write one value after the field's name, not a mapping, such as: hostname: VALUE",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fixes (-want +got):\n%s", diff)
	}
}
