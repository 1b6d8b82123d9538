package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rotatedLog writes a signed log of several rotated files.
func rotatedLog(t *testing.T) (*Log, ed25519.PublicKey) {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	l, err := Open(filepath.Join(t.TempDir(), "audit.jsonl"), Options{MaxSize: 4 << 10, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		fill(t, l, 10)
	}
	if n := len(Rotated(l.Path())); n < 5 {
		t.Fatalf("%d rotated files", n)
	}
	return l, pub
}

func size(files []string) (n int64) {
	for _, f := range files {
		fi, _ := os.Stat(f)
		n += fi.Size()
	}
	return n
}

// Files removed by the retention are named in the log, which verifies
// from the first file kept; a file removed besides, or removed without a
// record, shows.
func TestRetainBySize(t *testing.T) {
	l, pub := rotatedLog(t)
	before := Rotated(l.Path())
	max := size(Files(l.Path())) / 2
	gone, err := l.Retain(Retention{MaxBytes: max}, time.Now())
	if err != nil || len(gone) == 0 {
		t.Fatalf("%v %v", gone, err)
	}
	kept := Rotated(l.Path())
	if kept[0] != before[len(gone)] || size(Files(l.Path())) > max+4<<10 {
		t.Fatalf("kept %v of %v, %d bytes", kept, before, size(Files(l.Path())))
	}
	head, _ := ReadHead(l.Path())
	s, err := Verify(Files(l.Path()), pub, head)
	if err != nil || s.From != gone[len(gone)-1].LastSeq+1 || s.RetainedBy == 0 {
		t.Fatalf("after the retention: %+v %v", s, err)
	}
	for i, g := range gone {
		if g.Reason != "max_bytes" || g.LastHash == "" || i > 0 && g.FirstSeq != gone[i-1].LastSeq+1 {
			t.Fatalf("removed: %+v", gone)
		}
	}

	// One more file removed, the retention's record does not cover it.
	os.Remove(kept[0])
	_, err = Verify(Files(l.Path()), pub, head)
	if p := problem(t, err); !strings.Contains(p.What, "removed: the chain starts at record") {
		t.Fatalf("a file removed besides the retention: %v", p)
	}
}

// A log whose oldest files are removed with no record of it does not
// verify.
func TestRemovedWithoutRetention(t *testing.T) {
	l, pub := rotatedLog(t)
	os.Remove(Rotated(l.Path())[0])
	_, err := Verify(Files(l.Path()), pub, nil)
	if p := problem(t, err); !strings.Contains(p.What, "removed: the chain starts at record") {
		t.Fatalf("%v", p)
	}
}

// Files past max_age go to the archive, where they still verify with
// the rest; the newest rotated file stays, however old.
func TestRetainByAgeToArchive(t *testing.T) {
	l, pub := rotatedLog(t)
	before := Rotated(l.Path())
	old := time.Now().Add(-48 * time.Hour)
	for _, f := range before {
		os.Chtimes(f, old, old)
	}
	archive := filepath.Join(t.TempDir(), "archive")
	gone, err := l.Retain(Retention{MaxAge: 24 * time.Hour, Archive: archive}, time.Now())
	if err != nil || len(gone) != len(before)-1 || gone[0].Reason != "max_age" {
		t.Fatalf("%+v %v", gone, err)
	}
	if kept := Rotated(l.Path()); kept[0] != before[len(before)-1] {
		t.Fatalf("kept %v", kept)
	}
	var all []string
	for _, f := range before[:len(before)-1] {
		all = append(all, filepath.Join(archive, filepath.Base(f)))
	}
	all = append(all, Files(l.Path())...)
	head, _ := ReadHead(l.Path())
	if s, err := Verify(all, pub, head); err != nil || s.From != 0 {
		t.Fatalf("the archive with the log: %+v %v", s, err)
	}
	// Nothing past the bounds: nothing removed, nothing recorded.
	l2, _ := rotatedLog(t)
	n := len(lines(t, l2.Path()))
	if gone, err := l2.Retain(Retention{MaxAge: 24 * time.Hour, MaxBytes: 1 << 30}, time.Now()); err != nil || len(gone) != 0 || len(lines(t, l2.Path())) != n {
		t.Fatalf("within the bounds: %v %v", gone, err)
	}
}

// One retention at a time: while another process applies it, Retain
// leaves the files to it.
func TestRetainOneAtATime(t *testing.T) {
	l, _ := rotatedLog(t)
	lock := mustCreate(t, l.Path()+".retain")
	if err := flock(lock); err != nil {
		t.Fatal(err)
	}
	before := Rotated(l.Path())
	other, _ := Open(l.Path(), Options{})
	if gone, err := other.Retain(Retention{MaxBytes: 1}, time.Now()); err != nil || len(gone) != 0 || len(Rotated(l.Path())) != len(before) {
		t.Errorf("with the lock held: %v %v", gone, err)
	}
	lock.Close()
	if gone, err := other.Retain(Retention{MaxBytes: 1}, time.Now()); err != nil || len(gone) != len(before)-1 {
		t.Errorf("after: %d of %d removed, %v", len(gone), len(before), err)
	}
}
