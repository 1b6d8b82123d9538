package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// A label rule written for read_file names files: run, which can read them
// too, carries the label when its view holds such a file, and when that
// cannot be known.
func TestRunCarriesTheLabelsOfWhatItCanRead(t *testing.T) {
	const prof = `version: 1
agent: a
tools:
  read_file:
    class: read
    labels:
      - arg: path
        glob: '**/.env*'
        labels: [secret]
  run:
    class: write
  fetch:
    class: external
`
	p, err := profile.Parse("t.yaml", []byte(prof))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		reach   gateway.Reacher
		refused bool
	}{
		{"a .env in the view", func(ctx context.Context, q gateway.ReachQuery) (gateway.ReachAnswer, error) {
			if len(q.Rules) != 1 || q.Rules[0] != (pathglob.Rule{Glob: "**/.env*"}) {
				t.Errorf("asked for %v", q.Rules)
			}
			return gateway.ReachAnswer{Rules: []int{0}, Complete: true}, nil
		}, true},
		{"none", func(context.Context, gateway.ReachQuery) (gateway.ReachAnswer, error) {
			return gateway.ReachAnswer{Complete: true}, nil
		}, false},
		{"not all looked at", func(context.Context, gateway.ReachQuery) (gateway.ReachAnswer, error) {
			return gateway.ReachAnswer{}, nil
		}, true},
		{"unknown", func(context.Context, gateway.ReachQuery) (gateway.ReachAnswer, error) {
			return gateway.ReachAnswer{}, errors.New("no sandbox")
		}, true},
		{"no reacher", nil, true},
	} {
		g, err := gateway.New(context.Background(), gateway.Config{
			Profile: p,
			Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
				return []byte(`{"ok":true}`), false, nil
			},
			Reach: tt.reach,
		})
		if err != nil {
			t.Fatal(err)
		}
		cs := (&fixture{g: g}).connect(t)
		if text, isErr := call(t, cs, "run", `{"argv":["python3","-c","print(open('.env').read())"]}`); isErr {
			t.Fatalf("%s: run: %q", tt.name, text)
		}
		text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`)
		if refused := isErr && strings.Contains(text, `carries "secret", brought in by call 1 (run`); refused != tt.refused {
			t.Errorf("%s: fetch after run: %v %q", tt.name, isErr, text)
		}
		g.Close()
	}
}

// More label rules than one look asks about: those left out are carried
// as if their files were there, never dropped.
func TestRunCarriesTheRulesNotAskedAbout(t *testing.T) {
	src := "version: 1\nagent: a\nlabels: ["
	for i := range 66 {
		if i > 0 {
			src += ", "
		}
		src += fmt.Sprintf("l%d", i)
	}
	src += "]\ntools:\n  read_file:\n    class: read\n    labels:\n"
	for i := range 66 {
		src += fmt.Sprintf("      - arg: path\n        glob: '**/f%d'\n        labels: [l%d]\n", i, i)
	}
	src += "  run:\n    class: write\n  fetch:\n    class: external\n    accepts: [l64]\n"
	p, err := profile.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var asked int
	g, err := gateway.New(context.Background(), gateway.Config{
		Profile: p,
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			return []byte(`{"ok":true}`), false, nil
		},
		Reach: func(ctx context.Context, q gateway.ReachQuery) (gateway.ReachAnswer, error) {
			asked = len(q.Rules)
			return gateway.ReachAnswer{Complete: true}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cs := (&fixture{g: g}).connect(t)
	if text, isErr := call(t, cs, "run", `{"argv":["true"]}`); isErr {
		t.Fatalf("run: %q", text)
	}
	if asked != 64 {
		t.Errorf("asked about %d rules, want 64", asked)
	}
	// The rules asked about named nothing; the two left out are carried.
	text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`)
	if !isErr || !strings.Contains(text, `carries "l65", brought in by call 1 (run`) {
		t.Errorf("fetch after run: %v %q", isErr, text)
	}
}
