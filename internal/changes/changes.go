// Package changes keeps what a sandbox in a reviewed workspace
// (workspace.mode: review) wrote, for a person to see before it lands on
// the host.
//
// While such a sandbox runs, every write goes to the upper layer of an
// overlay over the host's workspace; the host tree is not written. When the
// sandbox has ended, Capture compares that upper layer with the host tree
// and keeps the difference, a change set, in cordon's state directory
// (STATE/changes/RUN/): set.json lists each added, modified and deleted
// path with its new and old state and flags what needs care (protected
// paths, new executables, set-id bits, links pointing outside, large or
// binary files, special files, paths the host changed during the run);
// blobs/SHA256 holds each new file's content once. set.json is written
// last and atomically: a directory without it is an incomplete capture and
// is ignored. A set's Digest covers its run, workspace and changes (with
// what git would obey, Obeys, where there is any: a set without has the
// digest it always had): what an approval of it covers. Changes lists a
// set, Diff shows it, Apply lands it (or part of it) and Discard drops it.
//
// The upper layer is hostile: the sandbox chose every name, type, mode and
// byte in it. Capture reads it through descriptors only, never follows a
// link in it, opens nothing but regular files and directories, and bounds
// names, depth, entries and bytes, so that a hostile layer can make it
// fail but not hang or exhaust memory. Names are kept exactly, whatever
// bytes they hold; whatever is printed of them goes through termsafe.
//
// The host tree may hold links planted before the run. Capture, Diff and
// Apply reach every host path from a descriptor of the workspace's root
// with openat2 and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS (Apply adds
// RESOLVE_NO_XDEV): no link is followed and nothing outside is touched.
// Apply checks each path against the state Capture saw and refuses (as a
// conflict, reported) a path the host changed since, writes an added file
// unnamed (O_TMPFILE) and links it into place, a modified file or link
// under a temporary name in its directory and renames it into place, and
// strips set-id bits. Apply does not refuse protected paths: the approval
// of what carries FlagProtected is its caller's. A process killed in the middle of Apply leaves each file old
// or new, never partial, and a second Apply finishes the job: a path
// already in its new state is reported as such. Apply does not fsync each
// file, only syncs the workspace's file system once at the end: a power
// loss during Apply may leave files empty or partial, which is out of
// scope.
package changes

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Kinds of change.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Types of path.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeSpecial = "special" // a FIFO, socket or device: listed, never applied
)

// Flags: what about a change needs a reviewer's care.
const (
	FlagProtected     = "protected"      // a path the host's tools run or obey (protect.Protected)
	FlagExecutable    = "executable"     // a file that is executable now and was not before
	FlagSetuid        = "setuid"         // set-user-id or set-group-id bits, stripped when applied
	FlagWorldWritable = "world_writable" // a file or directory anyone may write once it lands
	FlagOutsideLink   = "outside_link"   // a link whose target is absolute or leads out of the workspace
	FlagLarge         = "large"          // a file over LargeSize bytes
	FlagBinary        = "binary"         // a file with a NUL in its first 8000 bytes, or not UTF-8
	FlagSpecial       = "special"        // a FIFO, socket or device, never applied
	FlagConflict      = "conflict"       // the host changed the path during the run
)

// LargeSize is the size above which a file is flagged large: Diff shows
// no more of a file, so what it leaves out is flagged.
const LargeSize = 1 << 20

// Stat is a host path's state, as Apply compares it to find a host change.
type Stat struct {
	Type    string `json:"type"`
	Mode    uint32 `json:"mode"`
	Size    int64  `json:"size"`
	Ino     uint64 `json:"ino"`
	Dev     uint64 `json:"dev"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// Change is one path of the workspace that the sandbox added, modified or
// deleted. A path whose type changed (a file replaced by a directory) is
// two changes: the old deleted (with everything under it) and the new
// added.
type Change struct {
	// Path is slash-separated, relative to the workspace's root, clean,
	// never "" or ".." or under "..", without a leading "/". It may hold
	// any bytes but "/" and NUL.
	Path string
	// Kind is Added, Modified or Deleted.
	Kind string
	// Type is the path's type in its new state (for a deletion: its old
	// type), Mode its permission bits (07777).
	Type string
	Mode uint32
	// OldType and OldMode are the host's, for a modification or deletion.
	OldType string
	OldMode uint32
	// Size and SHA256 are a new file's content; OldSize and OldSHA256 the
	// host's, for a file modified or deleted.
	Size      int64
	SHA256    string
	OldSize   int64
	OldSHA256 string
	// Target and OldTarget are a symbolic link's text, new and old.
	Target, OldTarget string
	// Flags say what needs care (Flag...), sorted.
	Flags []string
	// Obeys says, for a change inside a git directory flagged protected,
	// what git would run or obey: the variables of a configuration that
	// are held (key = value), or why another file is (obey.JudgeGit).
	Obeys []string
	// Base is the host path's state when captured; nil when it did not
	// exist.
	Base *Stat
}

// Has reports whether c carries flag.
func (c *Change) Has(flag string) bool { return slices.Contains(c.Flags, flag) }

// Set is the change set of one run.
type Set struct {
	// Run is the run's id, Workspace the host workspace's absolute path.
	Run       string
	Workspace string
	// Started is when the run started: a host path whose change time is
	// not before it was changed during the run. Captured is when the set
	// was made.
	Started  time.Time
	Captured time.Time
	// Changes are sorted by Path (a deletion before an addition of the
	// same path).
	Changes []Change
	// Bytes is the new content's size, in total.
	Bytes int64
	// Digest is the SHA-256 (hex) of the canonical JSON of Run, Workspace
	// and Changes: what an approval of the set covers.
	Digest string
	// Applied are the paths Apply has landed (or found landed), sorted;
	// Load fills it from applied.json.
	Applied []string

	// upper, for a set Capture made with Limits.Link, is what it saw of
	// each added path in the upper layer (see Land).
	upper map[string]upperEntry
	// unmade are the added files whose blob Capture left to be made from
	// the layer when needed (Land).
	unmade map[string]bool
	// still are the landings of Limits.Landed the capture found true of
	// the host still.
	still map[string]Landed
	// ufile identifies each entry of the upper layer as Capture saw it
	// (with Limits.Landed).
	ufile map[string]fileID
}

// fileID is an entry of the upper layer as Capture saw it: its inode and
// change time, and whether that is too close to the capture to be trusted
// alone (see Landed).
type fileID struct {
	ino   uint64
	ctime int64
	racy  bool
}

// upperEntry is an added path of the upper layer as Capture saw it.
type upperEntry struct {
	ino      uint64
	ctime    int64 // its change time, in nanoseconds
	uid, gid uint32
	// plain: what the sandbox made there lands as it is, by a rename of
	// the directory that holds it: a directory, a link, or a regular
	// file with one name, no set-id bit, no extended attribute, no inode
	// flag the file system does not set itself, and the mode it was made
	// with.
	plain bool
}

// Limits bound a capture: beyond them Capture fails. Callers pass the
// profile's workspace_inodes and workspace_size; zero takes the default.
type Limits struct {
	MaxEntries int   // paths in the upper layer (its inodes)
	MaxBytes   int64 // bytes of new content
	// Link keeps a new file's content by linking the upper layer's file
	// into the blobs, where both are on one file system, instead of
	// copying it: for a layer on disk that no process writes any more (a
	// guarded workspace's, whose sandbox has ended), which Land then moves
	// into the workspace by a rename.
	Link bool
	// Landed are the paths that landed before from this same layer,
	// which stays in use (see Landed); the set captured says which of them
	// are still as they landed, for Remember. nil: the layer is captured
	// once only, and Remember knows nothing of it.
	Landed map[string]Landed
}

// Default limits, and hard bounds no hostile layer gets past.
const (
	DefaultMaxEntries = 1 << 20
	DefaultMaxBytes   = 8 << 30
	maxDepth          = 256      // directory levels
	maxPath           = 4096     // PATH_MAX: bytes of a path, or a link's text
	maxName           = 255      // NAME_MAX
	maxDeleted        = 1 << 21  // host paths listed as deleted
	maxMeta           = 16 << 20 // bytes of paths and link texts in a set
)

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Files in a set's directory.
const (
	setFile     = "set.json"
	appliedFile = "applied.json"
	blobDir     = "blobs"
)

// ValidRun reports whether run can name a change set: 1 to 64 of a-z, 0-9
// and "-", not starting with "-".
func ValidRun(run string) bool {
	if run == "" || len(run) > 64 || run[0] == '-' {
		return false
	}
	for _, c := range []byte(run) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func runDir(dir, run string) (string, error) {
	if !ValidRun(run) {
		return "", fmt.Errorf("change set %q: not a run id", run)
	}
	return filepath.Join(dir, run), nil
}

// validPath reports whether p is a path a Change may have.
func validPath(p string) bool {
	if p == "" || len(p) > maxPath || strings.HasPrefix(p, "/") || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for _, n := range strings.Split(p, "/") {
		if n == "" || n == "." || n == ".." || len(n) > maxName {
			return false
		}
	}
	return true
}

// bstr is a string kept exactly in JSON: a JSON string when it is valid
// UTF-8, else {"base64": "..."} (encoding/json would replace the invalid
// bytes).
type bstr string

func (b bstr) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(b))})
}

func (b *bstr) UnmarshalJSON(data []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		var v struct{ Base64 string }
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(v.Base64)
		*b = bstr(raw)
		return err
	}
	var s string
	err := json.Unmarshal(data, &s)
	*b = bstr(s)
	return err
}

// changeJSON is a Change as set.json holds it.
type changeJSON struct {
	Path      bstr     `json:"path"`
	Kind      string   `json:"kind"`
	Type      string   `json:"type"`
	Mode      uint32   `json:"mode"`
	OldType   string   `json:"old_type,omitempty"`
	OldMode   uint32   `json:"old_mode,omitempty"`
	Size      int64    `json:"size,omitempty"`
	SHA256    string   `json:"sha256,omitempty"`
	OldSize   int64    `json:"old_size,omitempty"`
	OldSHA256 string   `json:"old_sha256,omitempty"`
	Target    bstr     `json:"target,omitempty"`
	OldTarget bstr     `json:"old_target,omitempty"`
	Flags     []string `json:"flags,omitempty"`
	Obeys     []string `json:"obeys,omitempty"`
	Base      *Stat    `json:"base,omitempty"`
}

// MarshalJSON writes c with its names kept exactly (see bstr).
func (c Change) MarshalJSON() ([]byte, error) {
	return json.Marshal(changeJSON{bstr(c.Path), c.Kind, c.Type, c.Mode, c.OldType, c.OldMode,
		c.Size, c.SHA256, c.OldSize, c.OldSHA256, bstr(c.Target), bstr(c.OldTarget), c.Flags, c.Obeys, c.Base})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change) UnmarshalJSON(data []byte) error {
	var j changeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*c = Change{string(j.Path), j.Kind, j.Type, j.Mode, j.OldType, j.OldMode,
		j.Size, j.SHA256, j.OldSize, j.OldSHA256, string(j.Target), string(j.OldTarget), j.Flags, j.Obeys, j.Base}
	return nil
}

// setJSON is a Set as set.json holds it.
type setJSON struct {
	Run       string    `json:"run"`
	Workspace bstr      `json:"workspace"`
	Started   time.Time `json:"started"`
	Captured  time.Time `json:"captured"`
	Changes   []Change  `json:"changes"`
	Bytes     int64     `json:"bytes"`
	Digest    string    `json:"digest"`
}

// MarshalJSON writes s as set.json holds it, with what has landed.
func (s *Set) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		setJSON
		Applied []string `json:"applied"`
	}{setJSON{s.Run, bstr(s.Workspace), s.Started, s.Captured, s.Changes, s.Bytes, s.Digest}, append([]string{}, s.Applied...)})
}

// digest computes what Set.Digest holds.
func digest(s *Set) string {
	b, err := json.Marshal(struct {
		Run       string   `json:"run"`
		Workspace bstr     `json:"workspace"`
		Changes   []Change `json:"changes"`
	}{s.Run, bstr(s.Workspace), s.Changes})
	if err != nil {
		panic(err) // nothing in a Set fails to marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sortChanges orders changes by path, a deletion before an addition of
// the same path.
func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Path != cs[j].Path {
			return cs[i].Path < cs[j].Path
		}
		return cs[i].Kind == Deleted && cs[j].Kind != Deleted
	})
}

// maxSetFile bounds set.json as Load reads it.
const maxSetFile = 1 << 30

// Load reads the change set of run from dir (STATE/changes), checking the
// run id, each path and the set's digest.
func Load(dir, run string) (*Set, error) {
	rd, err := runDir(dir, run)
	if err != nil {
		return nil, err
	}
	data, err := readFile(filepath.Join(rd, setFile), maxSetFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("change set %s: none (or its capture did not finish)", run)
	}
	if err != nil {
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	var j setJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("change set %s: %s: %w", run, setFile, err)
	}
	s := &Set{Run: j.Run, Workspace: string(j.Workspace), Started: j.Started, Captured: j.Captured,
		Changes: j.Changes, Bytes: j.Bytes, Digest: j.Digest}
	if s.Run != run {
		return nil, fmt.Errorf("change set %s: its %s names run %q", run, setFile, s.Run)
	}
	for _, c := range s.Changes {
		if !validPath(c.Path) {
			return nil, fmt.Errorf("change set %s: invalid path %q", run, c.Path)
		}
		if c.SHA256 != "" && !validSum(c.SHA256) {
			return nil, fmt.Errorf("change set %s: %q: invalid sha256", run, c.Path)
		}
	}
	if d := digest(s); d != s.Digest {
		return nil, fmt.Errorf("change set %s: digest %s does not match its content (%s)", run, s.Digest, d)
	}
	if data, err := readFile(filepath.Join(rd, appliedFile), maxSetFile); err == nil {
		var a appliedJSON
		if err := json.Unmarshal(data, &a); err != nil {
			return nil, fmt.Errorf("change set %s: %s: %w", run, appliedFile, err)
		}
		if a.Digest == s.Digest {
			for _, p := range a.Applied {
				s.Applied = append(s.Applied, string(p))
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	return s, nil
}

func validSum(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size && strings.ToLower(s) == s
}

// appliedJSON is applied.json: the paths landed, for the set of digest.
type appliedJSON struct {
	Digest  string `json:"digest"`
	Applied []bstr `json:"applied"`
}

// readFile reads name, a file of cordon's own state, up to max bytes,
// without following a link at its last name.
func readFile(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", name, max)
	}
	return os.ReadFile(name)
}

// List reads every complete change set in dir, newest capture first. A
// set that fails to load is left out, and its error is in broken: one bad
// set hides none of the others.
func List(dir string) (sets []*Set, broken []error, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("change sets: %w", err)
	}
	var out []*Set
	for _, e := range ents {
		if !e.IsDir() || !ValidRun(e.Name()) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, e.Name(), setFile)); err != nil {
			continue // incomplete capture
		}
		s, err := Load(dir, e.Name())
		if err != nil {
			broken = append(broken, err)
			continue
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Captured.After(out[j].Captured) })
	return out, broken, nil
}

// Exists reports whether dir holds a change set of run, complete or not.
func Exists(dir, run string) bool {
	rd, err := runDir(dir, run)
	if err != nil {
		return false
	}
	_, err = os.Lstat(rd)
	return err == nil
}

// Discard removes the change set of run from dir.
func Discard(dir, run string) error {
	rd, err := runDir(dir, run)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(rd); err != nil {
		return fmt.Errorf("change set %s: %w", run, err)
	}
	if err := os.RemoveAll(rd); err != nil {
		return fmt.Errorf("change set %s: discard: %w", run, err)
	}
	return nil
}

// Select returns the changes paths name: each is a path of the set or a
// directory, which selects everything under it ("." or "" selects all). A
// path may be given relative to the workspace or absolute inside it. A
// path that selects nothing is an error naming it. No paths select all.
func (s *Set) Select(paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return s.Changes, nil
	}
	want := make([]string, 0, len(paths))
	for _, p := range paths {
		rel := p
		if filepath.IsAbs(p) {
			r, err := filepath.Rel(s.Workspace, p)
			if err != nil || r == ".." || strings.HasPrefix(r, "../") {
				return nil, fmt.Errorf("%q is not in the workspace %q", p, s.Workspace)
			}
			rel = r
		}
		rel = path.Clean(filepath.ToSlash(rel))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("%q is not in the workspace", p)
		}
		if rel == "." {
			return s.Changes, nil
		}
		found := false
		for _, c := range s.Changes {
			if under(c.Path, rel) {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%q: no change in set %s", p, s.Run)
		}
		want = append(want, rel)
	}
	var out []Change
	for _, c := range s.Changes {
		for _, w := range want {
			if under(c.Path, w) {
				out = append(out, c)
				break
			}
		}
	}
	return out, nil
}

// under reports whether p is dir or beneath it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// ApplyOptions adjust Apply.
type ApplyOptions struct {
	// Owner is the user and group id new files, links and directories are
	// given (a modified file keeps its host owner) when cordon runs as
	// root; nil leaves them cordon's.
	Owner *[2]int

	// Take lands a file whose blob no other change of the set names by
	// renaming the blob into place, where it is on the workspace's file
	// system, instead of copying it; the set cannot be applied again.
	Take bool

	// hook, in tests, runs when the new content of path is written under
	// its temporary name (placed false) and when it is in place.
	hook func(path string, placed bool)
}

// Report says what became of each selected change.
type Report struct {
	// Applied landed now; Already were found in their new state (an
	// earlier, interrupted Apply); Refused are never applied (special
	// files).
	Applied, Already, Refused []string
	// Conflicts were left alone: the host changed them, or what leads to
	// them, since the capture.
	Conflicts []Conflict

	// placed is the host's state of each path Apply wrote, as it was the
	// moment after (for Remember).
	placed map[string]placedStat
}

// placedStat is the state of a host path Apply wrote.
type placedStat struct {
	ctime int64
	ino   uint64
	mode  uint32
}

// Conflict is a path Apply left alone, and why.
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// WorkspaceOwner is, for a cordon running as root, the owner of the
// workspace's root ws: whom the sandbox user was mapped to, and so whom the
// files Apply adds belong to (ApplyOptions.Owner). nil otherwise: new files
// are then the user's own.
func WorkspaceOwner(ws string) *[2]int {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Lstat(ws)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &[2]int{int(st.Uid), int(st.Gid)}
}
