// Package labelstore keeps the labels of files written by labelled agent
// sessions in cordon's state, per workspace, so that they outlive the
// gateway that gave them: a stdio client starts one gateway per
// conversation, and a file a tainted session wrote stays tainted for the
// next one. Gateways of one workspace share one file, changed under an
// exclusive lock and merged, never overwritten: a label is only ever added.
package labelstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// maxBytes bounds the file read: MaxFiles entries and more.
const maxBytes = 16 << 20

// file is what the store holds.
type file struct {
	Workspace string                 `json:"workspace"`
	Files     []toolpolicy.FileEntry `json:"files"`
	Spilled   []string               `json:"spilled,omitempty"`
}

// Store is the labels of one workspace's files, in dir.
type Store struct {
	path, workspace string
}

// Open is the store of workspace in dir (made when missing, 0700).
func Open(dir, workspace string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the store of file labels: %w", err)
	}
	sum := sha256.Sum256([]byte(workspace))
	return &Store{path: filepath.Join(dir, hex.EncodeToString(sum[:16])+".json"), workspace: workspace}, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Load merges what the store holds into f.
func (s *Store) Load(f *toolpolicy.FileLabels) error {
	return s.locked(unix.LOCK_SH, func() error {
		v, err := s.read()
		if err == nil {
			f.Merge(v.Files, v.Spilled)
		}
		return err
	})
}

// Save merges f into the store, and what other gateways saved into f.
func (s *Store) Save(f *toolpolicy.FileLabels) error {
	return s.locked(unix.LOCK_EX, func() error {
		v, err := s.read()
		if err != nil {
			return err
		}
		f.Merge(v.Files, v.Spilled)
		entries, spilled := f.Entries()
		b, err := json.Marshal(file{Workspace: s.workspace, Files: entries, Spilled: spilled})
		if err != nil {
			return err
		}
		tmp := s.path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return fmt.Errorf("the store of file labels: %w", err)
		}
		if err := os.Rename(tmp, s.path); err != nil {
			return fmt.Errorf("the store of file labels: %w", err)
		}
		return nil
	})
}

// locked runs fn holding the store's lock (how: LOCK_SH or LOCK_EX).
func (s *Store) locked(how int, fn func() error) error {
	lf, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("the store of file labels: %w", err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), how); err != nil {
		return fmt.Errorf("the store of file labels: locking %s: %w", lf.Name(), err)
	}
	return fn()
}

// read is what the store holds; nothing when it has no file yet. A file
// that cannot be read is an error: labels are never dropped silently.
func (s *Store) read() (file, error) {
	var v file
	fh, err := os.OpenFile(s.path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("the store of file labels: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxBytes+1))
	if err != nil {
		return v, fmt.Errorf("the store of file labels %s: %w", s.path, err)
	}
	if len(b) > maxBytes {
		return v, fmt.Errorf("the store of file labels %s is larger than %d bytes", s.path, maxBytes)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("the store of file labels %s: %w", s.path, err)
	}
	if v.Workspace != s.workspace {
		return file{}, fmt.Errorf("the store of file labels %s is of the workspace %s, not %s", s.path, v.Workspace, s.workspace)
	}
	return v, nil
}
