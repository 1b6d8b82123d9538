package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// A token printed in two results, half in each, with a call between
// them, labels the session secret when the second half is shown, as the
// token shown whole would: what the session may send out is then held to
// it.
func TestSecretAcrossResults(t *testing.T) {
	const pat = "ghp_R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"
	p, err := profile.Parse("test.yaml", []byte("version: 1\nagent: tester\ntools:\n  run:\n    class: read\n  fetch:\n    class: external\n"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	pieces := []string{"first: " + pat[:20], pat[20:] + " and the rest"}
	g, err := gateway.New(context.Background(), gateway.Config{Profile: p, Resolve: fakeResolve(nil),
		Run: func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if tool == "fetch" || len(pieces) == 0 {
				return []byte("ok"), false, nil
			}
			out := pieces[0]
			pieces = pieces[1:]
			return []byte(out), false, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	cs := (&fixture{g: g}).connect(t)
	call(t, cs, "run", `{"argv":["sh","-c","echo ${T:0:20}"]}`)
	if text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/"}`); isErr {
		t.Fatalf("a fetch after half a token: %s", text)
	}
	call(t, cs, "run", `{"argv":["sh","-c","echo ${T:20}"]}`)
	text, isErr := call(t, cs, "fetch", `{"url":"https://example.org/?q=x"}`)
	if !isErr || !strings.Contains(text, `"secret"`) {
		t.Fatalf("a fetch after the token's two halves: %v %s", isErr, text)
	}
}
