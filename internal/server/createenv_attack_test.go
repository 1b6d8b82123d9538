package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/client"
	"github.com/cordon-sandbox/cordon/internal/api"
)

// The caps hold on the create's env and a command's together.
func TestAttack_EnvCapsCombined(t *testing.T) {
	f := newFixture(t, 0, nil, nil)
	ctx := context.Background()
	a := f.client("alice-a")
	base := map[string]string{}
	for i := 0; i < maxEnv; i++ {
		base[fmt.Sprintf("V%04d", i)] = strings.Repeat("x", 900)
	}
	sb, err := a.CreateWith(ctx, api.CreateRequest{Env: base})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"x"}, Env: map[string]string{"EXTRA": "1"}})
	if !client.IsStatus(err, 413) {
		t.Errorf("over maxEnv together: %v", err)
	}
	big := map[string]string{}
	for i := 0; i < 200; i++ {
		big[fmt.Sprintf("V%04d", i)] = strings.Repeat("y", 120<<10/200*10)
	}
	_, err = a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"x"}, Env: big})
	if !client.IsStatus(err, 413) {
		t.Errorf("overriding the create's values to grow the environment past its cap: %v", err)
	}
	_, err = a.CreateWith(ctx, api.CreateRequest{Env: base, Exec: &api.ExecRequest{Args: []string{"x"}, Env: map[string]string{"EXTRA": "1"}}})
	if !client.IsStatus(err, 413) {
		t.Errorf("first command over maxEnv together: %v", err)
	}
}
