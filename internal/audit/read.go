package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadAfter calls fn with each complete record of the log at path (its
// rotated files, then the current one) whose seq is after seq, in the
// chain's order. When the log holds the record at seq, its hash must be
// hash: otherwise the log is not the one whose records up to seq were
// seen, and ReadAfter says so without calling fn. An incomplete last line
// (a write cut off) is not a record.
func ReadAfter(path string, seq int64, hash string, fn func(Record) error) error {
	for _, file := range Files(path) {
		f, err := os.Open(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		err = readFile(f, seq, hash, fn)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// ErrReplaced is what ReadAfter returns when the record it was to read
// after is not the one it was given: the log is not the one indexed.
var ErrReplaced = errors.New("the log was replaced")

// readFile is ReadAfter on one file; a file whose last record is at or
// before seq is skipped unread.
func readFile(f *os.File, seq int64, hash string, fn func(Record) error) error {
	if last, _, err := lastRecord(f); err == nil && last.Seq < seq {
		return nil
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // nothing, or an incomplete line
		}
		if err != nil {
			return fmt.Errorf("audit log %s: %w", f.Name(), err)
		}
		rec, err := decode(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			return fmt.Errorf("audit log %s:%d: %v: run cordon audit verify", f.Name(), n, err)
		}
		switch {
		case rec.Seq == seq && hash != "" && rec.Hash != hash:
			return fmt.Errorf("audit log %s:%d: record %d is not the one indexed (hash %s, indexed %s): %w", f.Name(), n, seq, rec.Hash, hash, ErrReplaced)
		case rec.Seq <= seq:
			continue
		}
		if err := fn(*rec); err != nil {
			return err
		}
	}
}
