package tools

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A stamp changes when a name on the path is swapped (a file for a link,
// a directory for a link), and not when a file's content changes; a stamp
// taken right after a change is not settled.
func TestStamp(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "notes"), 0o755)
	x := filepath.Join(ws, "notes/x")
	os.WriteFile(x, []byte("a"), 0o644)
	time.Sleep(2 * SettleMargin)
	stamp := func() (string, string, bool) {
		s, above, settled, err := stampOf(x, ws)
		if err != nil {
			t.Fatal(err)
		}
		return s, above, settled
	}
	s0, a0, settled := stamp()
	if !settled {
		t.Fatal("a quiet directory is not settled")
	}
	os.WriteFile(x, []byte("b"), 0o644)
	if s, a, _ := stamp(); s != s0 || a != a0 {
		t.Error("a write of the file's content changed the stamp")
	}
	// The name swapped for a link and back.
	os.Symlink("../.env", x+".l")
	os.Rename(x, x+".f")
	os.Rename(x+".l", x)
	os.Rename(x+".f", x)
	s1, a1, settled := stamp()
	if s1 == s0 {
		t.Error("a swap of the name left the stamp as it was")
	}
	if a1 != a0 {
		t.Error("a swap in the parent changed the stamp of the directories above it")
	}
	if settled {
		t.Error("a stamp taken right after a change is settled")
	}
	// The parent swapped: the directories above show it.
	time.Sleep(2 * SettleMargin)
	os.Rename(filepath.Join(ws, "notes"), filepath.Join(ws, "old"))
	os.Mkdir(filepath.Join(ws, "notes"), 0o755)
	os.WriteFile(x, []byte("b"), 0o644)
	if _, a2, _ := stamp(); a2 == a1 {
		t.Error("a swap of the parent directory left the stamp above as it was")
	}
}

// ResolvePaths looks again while a directory keeps changing, and says so
// when it does not settle.
func TestResolvePathsSettles(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "x"), nil, 0o644)
	os.WriteFile(filepath.Join(ws, "y"), nil, 0o644) // ws changed just now
	start := time.Now()
	r := ResolvePaths([]string{filepath.Join(ws, "x")}, ws)
	if r[0].Error != "" || r[0].Unsettled || r[0].Stamp == "" {
		t.Fatalf("%+v", r[0])
	}
	if time.Since(start) < SettleMargin {
		t.Error("a fresh change time was not waited out")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Rename(filepath.Join(ws, "y"), filepath.Join(ws, "z"))
			os.Rename(filepath.Join(ws, "z"), filepath.Join(ws, "y"))
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(5 * time.Millisecond)
	r = ResolvePaths([]string{filepath.Join(ws, "x")}, ws)
	close(stop)
	<-done
	if !r[0].Unsettled {
		t.Errorf("a directory changing all the time settled: %+v", r[0])
	}
}
