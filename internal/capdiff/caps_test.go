package capdiff

import (
	"slices"
	"strings"
	"testing"
)

func TestSizeChanges(t *testing.T) {
	const old = "version: 1\nagent: a\n"
	grown := old + "session:\n  max_argument_bytes: 8MiB\n  max_result_bytes: 1MiB\n"
	var got []string
	for _, c := range Diff(load(t, old), load(t, grown)) {
		got = append(got, string(c.Kind)+" "+c.Field+": "+c.Message)
	}
	for _, want := range []string{
		"expansion session.max_argument_bytes: the largest arguments of a call are 8MiB (was 1MiB)",
		"reduction session.max_result_bytes: the largest results shown are 1MiB (was 4MiB)",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
		}
	}
	if cs := Diff(load(t, old), load(t, old+"session:\n  max_argument_bytes: 1MiB\n")); len(cs) != 0 {
		t.Errorf("the default written out is a change: %+v", cs)
	}
}
