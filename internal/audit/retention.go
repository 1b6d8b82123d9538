package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Default bounds of a log's files, for cordon run and cordon serve alike.
const (
	DefaultRetentionBytes = 1 << 30
	DefaultRetentionAge   = 90 * 24 * time.Hour
)

// Retention bounds the rotated files of a log on the disk.
type Retention struct {
	// MaxBytes bounds the log's files together (the rotated ones and the
	// current one); 0: no bound.
	MaxBytes int64
	// MaxAge bounds how old a rotated file's last write may be; 0: no
	// bound.
	MaxAge time.Duration
	// Archive is a directory the files go to instead of being deleted.
	Archive string
}

// RetentionType is the type of the record that names the files a
// retention removed, before it removes them.
const RetentionType = "audit_retention"

// RemovedFile is a rotated file a retention removed, as the log records it:
// the records it held and the hash of the last, which the first record
// kept names as its prev.
type RemovedFile struct {
	File     string    `json:"file"`
	Bytes    int64     `json:"bytes"`
	FirstSeq int64     `json:"first_seq"`
	LastSeq  int64     `json:"last_seq"`
	LastHash string    `json:"last_hash"`
	LastTime time.Time `json:"last_time"`
	// Reason is the bound it was past: max_bytes or max_age.
	Reason string `json:"reason"`
}

// Retain removes the oldest rotated files past r (or moves them to
// r.Archive), never the newest rotated file nor the current one. Before
// it removes anything, it appends a RetentionType record naming each file
// with the seq and hash of its last record: the removal shows in the
// chain, and Verify accepts a chain that starts after removed files only
// when such a record names the record before its first. It returns the
// files removed.
func (l *Log) Retain(r Retention, now time.Time) ([]RemovedFile, error) {
	if r.MaxBytes <= 0 && r.MaxAge <= 0 {
		return nil, nil
	}
	if len(Rotated(l.path)) < 2 {
		return nil, nil
	}
	// One retention at a time, among the processes sharing the log (each
	// cordon run applies it): another under way leaves nothing to do.
	lock, err := os.OpenFile(l.path+".retain", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit retention: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("audit retention: %w", err)
	}
	rotated := Rotated(l.path)
	if len(rotated) < 2 {
		return nil, nil
	}
	var total int64
	sizes := map[string]os.FileInfo{}
	for _, f := range Files(l.path) {
		fi, err := os.Stat(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit retention: %w", err)
		}
		sizes[f] = fi
		total += fi.Size()
	}
	var gone []RemovedFile
	for _, f := range rotated[:len(rotated)-1] {
		fi := sizes[f]
		if fi == nil {
			continue
		}
		reason := ""
		switch {
		case r.MaxAge > 0 && now.Sub(fi.ModTime()) > r.MaxAge:
			reason = "max_age"
		case r.MaxBytes > 0 && total > r.MaxBytes:
			reason = "max_bytes"
		}
		if reason == "" {
			break
		}
		first, last, err := ends(f)
		if err != nil {
			return nil, fmt.Errorf("audit retention: %s is kept: %w", f, err)
		}
		gone = append(gone, RemovedFile{File: filepath.Base(f), Bytes: fi.Size(), FirstSeq: first.Seq,
			LastSeq: last.Seq, LastHash: last.Hash, LastTime: last.Time, Reason: reason})
		total -= fi.Size()
	}
	if len(gone) == 0 {
		return nil, nil
	}
	data := map[string]any{"removed": gone, "first_kept_seq": gone[len(gone)-1].LastSeq + 1}
	if r.Archive != "" {
		data["archive"] = r.Archive
	}
	if err := l.Append(Event{Time: now.UTC(), Kind: Decision, Type: RetentionType, Data: data}); err != nil {
		return nil, fmt.Errorf("audit retention: recording the removal (nothing was removed): %w", err)
	}
	if r.Archive != "" {
		if err := os.MkdirAll(r.Archive, 0o700); err != nil {
			return nil, fmt.Errorf("audit retention: archive: %w", err)
		}
	}
	for i, g := range gone {
		src := filepath.Join(filepath.Dir(l.path), g.File)
		var err error
		if r.Archive == "" {
			err = os.Remove(src)
		} else {
			err = move(src, filepath.Join(r.Archive, g.File))
		}
		if err != nil {
			return gone[:i], fmt.Errorf("audit retention: %w", err)
		}
	}
	return gone, nil
}

// ends returns the first and last records of a log file.
func ends(path string) (first, last *Record, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, nil, fmt.Errorf("its first record: %w", err)
	}
	if first, err = decode(line[:len(line)-1]); err != nil {
		return nil, nil, fmt.Errorf("its first record: %w", err)
	}
	last, partial, err := lastRecord(f)
	if err != nil {
		return nil, nil, err
	}
	if partial > 0 || last.Seq == 0 {
		return nil, nil, errors.New("it does not end with a whole record")
	}
	return first, last, nil
}

// move renames src to dst, or copies it across file systems.
func move(src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("archiving %s: %w", src, err)
	}
	return os.Remove(src)
}
