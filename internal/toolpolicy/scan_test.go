package toolpolicy

import (
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// A label added for what a result held makes a sink refuse as the
// profile's own labels do, naming the call that brought it in.
func TestAddLabels(t *testing.T) {
	p, err := profile.Parse("p.yaml", []byte("version: 1\nagent: a\ntools:\n  read_file:\n    class: read\n  fetch:\n    class: external\n    accepts: [untrusted]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSession(p, nil)
	read := Call{Tool: "read_file", Args: map[string]any{"path": "notes.txt"}}
	if d := s.Decide(read); !d.Allow {
		t.Fatalf("read refused: %+v", d)
	}
	s.Record(s.Steps(), read, false, true)
	fetch := Call{Tool: "fetch", Args: map[string]any{"url": "https://example.org/"}}
	if d := s.Decide(fetch); !d.Allow {
		t.Fatalf("fetch refused before any label: %+v", d)
	}
	s.AddLabels(1, read, []string{"secret"})
	s.AddLabels(2, fetch, []string{"secret", ""})
	if got := s.Labels(); !slices.Equal(got, []string{"secret"}) {
		t.Errorf("labels %v, want [secret]", got)
	}
	d := s.Decide(fetch)
	if d.Allow || !strings.Contains(d.Reason, "secret") || !strings.Contains(d.Reason, "read_file") {
		t.Errorf("fetch after a credential was read: %+v, want a refusal naming secret and the read", d)
	}
}
