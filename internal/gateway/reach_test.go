package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
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
