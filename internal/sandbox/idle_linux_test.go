package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// A guarded workspace's sandbox kept alive has its layer on disk: without
// a directory for it, it is refused. WhenIdle runs only when no process
// but init runs: not while a process a command left behind (in a session
// of its own, which the command's end does not kill) lives; and a command
// given while it runs waits for it.
func TestWhenIdle(t *testing.T) {
	p := profile.Default()
	p.Workspace.Path = t.TempDir()
	p.Workspace.Mode = profile.ModeGuarded
	if err := p.SetLimit("wall", "60s"); err != nil {
		t.Fatal(err)
	}
	opts := sandbox.Options{Profile: p, Exe: cordon(t), Cwd: p.Workspace.Path, LookupEnv: os.LookupEnv}
	if _, err := sandbox.Start(opts); err == nil || !strings.Contains(err.Error(), "needs a directory on disk") {
		t.Fatalf("a guarded sandbox without a layer directory: %v", err)
	}
	opts.LayerDir = filepath.Join(t.TempDir(), "layer")
	if err := os.Mkdir(opts.LayerDir, 0o700); err != nil {
		t.Fatal(err)
	}
	box, err := sandbox.Start(opts)
	if err != nil {
		t.Skipf("this host cannot build sandboxes: %v", err)
	}
	t.Cleanup(box.Close)
	ctx := context.Background()
	if !box.WhenIdle(func(*os.File) {}) {
		t.Fatal("a sandbox that runs nothing is not idle")
	}
	o, _, _ := sh(t, ctx, box, "setsid sleep 3 </dev/null >/dev/null 2>&1 & sleep 0.3; echo x > x")
	if o.Status != "ok" {
		t.Fatalf("%+v", o)
	}
	if box.WhenIdle(func(*os.File) {}) {
		t.Fatal("idle while a process a command left runs")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !box.WhenIdle(func(*os.File) {}) {
		if time.Now().After(deadline) {
			t.Fatal("never idle once the process left behind ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A command given while WhenIdle runs starts after it.
	var order []string
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		<-started
		sh(t, ctx, box, "true")
		order = append(order, "command")
		close(done)
	}()
	box.WhenIdle(func(layer *os.File) {
		if _, err := os.Stat(filepath.Join(layer.Name(), "upper", "x")); err != nil {
			t.Errorf("the layer WhenIdle was given does not hold what the command wrote: %v", err)
		}
		close(started)
		time.Sleep(300 * time.Millisecond)
		order = append(order, "idle")
	})
	<-done
	if strings.Join(order, ",") != "idle,command" {
		t.Fatalf("order: %v", order)
	}
}
