// Package changes keeps what a sandbox changed in a reviewed workspace
// (workspace.mode: review): the change set, captured from the overlay's
// upper layer once the sandbox has ended, kept in cordon's state directory
// (never anywhere a sandbox sees), listed, diffed against the host's
// workspace, applied to it or discarded.
//
// A change set lives in DIR/RUN: set.json, written last and atomically (a
// directory without it is an interrupted capture and is ignored), blobs/
// with the new content of each file by SHA-256, and applied.json once some
// of it has landed. Its digest covers the run, the workspace and every
// change: an approval names the digest, so it covers exactly what lands.
//
// Everything in the layer was written by the sandbox and is hostile: it is
// read through descriptors only, never following a link, never opening
// anything but regular files and directories, bounded in entries, depth
// and bytes. Applying never follows a link in the host's tree either, and
// writes each file under a temporary name then renames it into place, so a
// cordon killed mid-apply leaves each file old or new, and a second apply
// finishes the job (a change already in place counts as done). Durability
// against power loss is one syncfs at the end, not a sync per file.
package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Kinds of change.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Types of entry.
const (
	File    = "file"
	Dir     = "dir"
	Symlink = "symlink"
	Special = "special"
)

// Flags a change may carry: what a reviewer should look at twice.
const (
	FlagProtected   = "protected"    // a path the host's tools run or obey
	FlagExecutable  = "executable"   // made executable
	FlagSetuid      = "setuid"       // setuid or setgid bit (stripped on apply)
	FlagOutsideLink = "outside_link" // a link pointing outside the workspace
	FlagLarge       = "large"        // over LargeFile bytes
	FlagBinary      = "binary"       // not text
	FlagSpecial     = "special"      // a FIFO, socket or device: never applied
	FlagConflict    = "conflict"     // the host changed the path during the run
)

// LargeFile is the size from which a file is flagged large.
const LargeFile = 10 << 20

// Stat is a host path's state, to tell whether it changed since.
type Stat struct {
	Type    string `json:"type"`
	Mode    uint32 `json:"mode"`
	Size    int64  `json:"size"`
	Ino     uint64 `json:"ino"`
	Dev     uint64 `json:"dev"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// Change is one path the sandbox changed.
type Change struct {
	// Path is slash-separated, relative to the workspace's root.
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Type is the new state's (the old one's for a deletion).
	Type      string   `json:"type"`
	Mode      uint32   `json:"mode,omitempty"`
	OldType   string   `json:"old_type,omitempty"`
	OldMode   uint32   `json:"old_mode,omitempty"`
	Size      int64    `json:"size,omitempty"`
	SHA256    string   `json:"sha256,omitempty"`
	OldSize   int64    `json:"old_size,omitempty"`
	OldSHA256 string   `json:"old_sha256,omitempty"`
	Target    string   `json:"target,omitempty"`
	OldTarget string   `json:"old_target,omitempty"`
	Flags     []string `json:"flags,omitempty"`
	// Base is the host path's state when the set was captured; nil when
	// it did not exist.
	Base *Stat `json:"base,omitempty"`
}

// Has reports whether c carries flag.
func (c Change) Has(flag string) bool {
	for _, f := range c.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Set is the change set of one run.
type Set struct {
	Run       string    `json:"run"`
	Workspace string    `json:"workspace"`
	Started   time.Time `json:"started"`
	Captured  time.Time `json:"captured"`
	Changes   []Change  `json:"changes"`
	Bytes     int64     `json:"bytes"`
	Digest    string    `json:"digest"`
	// Applied lists the paths that have landed (from applied.json).
	Applied []string `json:"applied,omitempty"`
}

// Limits bound a capture: a layer beyond them is refused.
type Limits struct {
	MaxEntries int
	MaxBytes   int64
}

var runRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// checkRun refuses a run id that is not a plain name.
func checkRun(run string) error {
	if !runRe.MatchString(run) {
		return fmt.Errorf("change set %q: not a change set id (lowercase letters, digits and -)", run)
	}
	return nil
}

// digest is the SHA-256 of the canonical JSON of what the set changes.
func (s *Set) digest() string {
	b, _ := json.Marshal(struct {
		Run       string   `json:"run"`
		Workspace string   `json:"workspace"`
		Changes   []Change `json:"changes"`
	}{s.Run, s.Workspace, s.Changes})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

const (
	setFile     = "set.json"
	appliedFile = "applied.json"
	blobDir     = "blobs"
)

// Load reads the change set run from dir, checking its digest.
func Load(dir, run string) (*Set, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, run, setFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no change set %s in %s (cordon changes lists them)", run, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	var s Set
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	if s.Run != run || s.digest() != s.Digest {
		return nil, fmt.Errorf("change set %s: its record does not match its digest: it was changed outside cordon", run)
	}
	if b, err := os.ReadFile(filepath.Join(dir, run, appliedFile)); err == nil {
		json.Unmarshal(b, &s.Applied)
	}
	return &s, nil
}

// List returns the complete change sets in dir, newest first.
func List(dir string) ([]*Set, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("change sets: %w", err)
	}
	var out []*Set
	for _, e := range ents {
		if !e.IsDir() || checkRun(e.Name()) != nil {
			continue
		}
		if s, err := Load(dir, e.Name()); err == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Captured.After(out[j].Captured) })
	return out, nil
}

// Discard removes the change set run.
func Discard(dir, run string) error {
	if err := checkRun(run); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, run)); err != nil {
		return fmt.Errorf("discarding change set %s: %w", run, err)
	}
	return nil
}

// Select returns the changes paths name: each an exact path or a directory
// holding changes; none names all.
func (s *Set) Select(paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return s.Changes, nil
	}
	var out []Change
	seen := map[string]bool{}
	for _, p := range paths {
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "./")
		found := false
		for _, c := range s.Changes {
			if c.Path == p || p == "." || strings.HasPrefix(c.Path, p+"/") {
				found = true
				if !seen[c.Path] {
					seen[c.Path] = true
					out = append(out, c)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("change set %s has no change at %q", s.Run, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// writeAtomic writes b to dir/name through a temporary file and a rename.
func writeAtomic(dir, name string, b []byte) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
