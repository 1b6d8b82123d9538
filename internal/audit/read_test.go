package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadAfter gives the records after a seq, across rotated files; an
// incomplete last line is no record; a log whose record at seq is not the
// one expected is refused.
func TestReadAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{MaxSize: 600})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := l.Append(Event{Kind: Decision, Type: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(Rotated(path)) == 0 {
		t.Fatal("no rotation")
	}
	var all []Record
	if err := ReadAfter(path, 0, "", func(r Record) error { all = append(all, r); return nil }); err != nil || len(all) != 10 {
		t.Fatalf("all: %d %v", len(all), err)
	}
	var seqs []int64
	if err := ReadAfter(path, 7, all[6].Hash, func(r Record) error { seqs = append(seqs, r.Seq); return nil }); err != nil || len(seqs) != 3 || seqs[0] != 8 {
		t.Fatalf("after 7: %v %v", seqs, err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":11,"prev":"`)
	f.Close()
	seqs = nil
	if err := ReadAfter(path, 9, all[8].Hash, func(r Record) error { seqs = append(seqs, r.Seq); return nil }); err != nil || len(seqs) != 1 {
		t.Fatalf("with an incomplete line: %v %v", seqs, err)
	}
	err = ReadAfter(path, 7, all[5].Hash, func(r Record) error { t.Fatal("called"); return nil })
	if !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), "the log was replaced") {
		t.Fatalf("another log: %v", err)
	}
}
