package probe

import (
	"bytes"
	"strings"
	"testing"
)

func TestBatteryIsWellFormed(t *testing.T) {
	all := Battery()
	ids := map[string]bool{}
	seen := map[string]bool{}
	last := ""
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("duplicate id %s", p.ID)
		}
		ids[p.ID] = true
		if p.Category == "" || p.Attempt == "" || p.Expect == "" || p.Run == nil {
			t.Errorf("%s: incomplete %+v", p.ID, p)
		}
		if p.Category != last {
			if seen[p.Category] {
				t.Errorf("%s: category %s is split in the battery", p.ID, p.Category)
			}
			seen[p.Category] = true
			last = p.Category
		}
	}
	if len(Select(all, "network")) == 0 || len(Select(all, "")) != len(all) {
		t.Error("Select")
	}
}

func TestReportRoundTrip(t *testing.T) {
	probes := []Probe{
		{ID: "a", Category: "x", Attempt: "try", Expect: "refused", Run: func(*Targets) (Status, string) { return Contained, "EPERM" }},
		{ID: "b", Category: "x", Attempt: "try", Expect: "refused", Run: func(*Targets) (Status, string) { return Escaped, "got in" }},
	}
	var buf bytes.Buffer
	RunAll(probes, &Targets{}, &buf)
	rs, err := Parse(strings.NewReader(buf.String()))
	if err != nil || len(rs) != 2 || rs[1].Status != Escaped || rs[0].Evidence != "EPERM" {
		t.Fatalf("got %+v, %v", rs, err)
	}
	if AllContained(rs) || !AllContained(rs[:1]) || AllContained(nil) {
		t.Error("AllContained")
	}
}

func TestCompare(t *testing.T) {
	old := []Result{{ID: "a", Status: Contained}, {ID: "b", Status: Contained}, {ID: "gone", Status: Contained}}
	new := []Result{{ID: "a", Status: Contained}, {ID: "b", Status: Escaped}, {ID: "added", Status: Contained}}
	cs := Compare(old, new)
	want := []Change{{ID: "added", New: Contained}, {ID: "b", Old: Contained, New: Escaped}, {ID: "gone", Old: Contained}}
	if len(cs) != len(want) {
		t.Fatalf("got %+v", cs)
	}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("change %d: got %+v, want %+v", i, cs[i], want[i])
		}
	}
	if s := Summarize(new); s.Total != 3 || s.Escaped != 1 || s.Contained != 2 {
		t.Errorf("summary %+v", s)
	}
}
