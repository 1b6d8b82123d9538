package server

import (
	"bufio"
	"context"
	"net/url"
	"testing"
	"time"
)

// A watch lasts until it is stopped: a drain ends it at once, telling its
// client why, rather than waiting for it for the whole grace.
func TestAttack_WatchHoldsDrainForItsWholeGrace(t *testing.T) {
	f, _ := newCmdFixture(t, nil, Commands{}, watchRun)
	ctx := context.Background()
	sb, err := f.client("alice-a").Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	resp := f.post(ctx, t, "alice-a", "GET", "/v1/sandboxes/"+sb.ID+"/files/watch?path="+url.QueryEscape(dir), "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	// Nothing else runs: only the (idle) watch is in flight.
	grace, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := f.srv.Drain(grace); err != nil {
		t.Errorf("with only a watch open, the drain waited %v and failed: %v", time.Since(start).Round(time.Millisecond), err)
	}
	cut := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
	defer cut.Stop()
	lines := bufio.NewScanner(resp.Body)
	var last string
	for lines.Scan() {
		last = lines.Text()
	}
	if last != `{"type":"end","reason":"the server is stopping"}` {
		t.Errorf("the watch's last line: %s", last)
	}
}
