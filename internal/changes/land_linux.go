package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Land applies at once what rv's policy does not hold of s, a set just
// captured from a guarded workspace's layer (with Limits.Link; layer is
// the layer's root, as Capture had it), and leaves
// the rest waiting as the set: its set.json is rewritten to hold only the
// held changes, under their own digest, which is what an approval covers.
// Held with a change are the changes beneath it when it is an added
// directory (they land with it or not at all) and the deletion of every
// directory above it (which cannot go while it stays); a change Apply
// leaves alone (a conflict: the host changed the path during the run)
// stays in the set too, for a person to see. An added directory of which
// everything lands, all of it plain (see upperEntry), lands whole: the
// sandbox's directory is renamed into place. The set is returned as it is
// left, with no changes when nothing waits (its directory is then
// removed). Nothing is landed when s cannot be read or rewritten.
func Land(s *Set, layer *os.File, dir string, rv Review, o ApplyOptions) (*Report, *Set, error) {
	rd, err := runDir(dir, s.Run)
	if err != nil {
		return nil, nil, err
	}
	pol := profile.Review{RequireApproval: rv.Require}
	deletedDirs := map[string]bool{}
	for _, c := range s.Changes {
		if c.Kind == Deleted && c.Type == TypeDir {
			deletedDirs[c.Path] = true
		}
	}
	held := map[string]bool{}
	heldDirs := map[string]bool{}
	for _, c := range s.Changes {
		// A conflict waits as what the policy holds does: the host's
		// change of the path (or of what leads to it) is for a person.
		if pol.NeedsApproval(c.Path, c.Kind, c.Flags) == "" && !c.Has(FlagConflict) {
			continue
		}
		held[c.Path] = true
		if c.Kind == Added && c.Type == TypeDir {
			heldDirs[c.Path] = true
		}
		for p := path.Dir(c.Path); p != "."; p = path.Dir(p) {
			held[p] = held[p] || deletedDirs[p]
		}
	}
	keep := func(c Change) bool {
		if held[c.Path] {
			return true
		}
		for p := path.Dir(c.Path); p != "."; p = path.Dir(p) {
			if heldDirs[p] {
				return true
			}
		}
		return false
	}
	var land, wait []Change
	for _, c := range s.Changes {
		if keep(c) {
			wait = append(wait, c)
		} else {
			land = append(land, c)
		}
	}
	o.Take = true
	var taken map[string]bool
	perFile := land
	if sameMount(layer, s.Workspace) {
		taken, perFile = takeable(s, land, held, heldDirs, o)
	}
	// What lands file by file, and what waits, needs its blob.
	if err := makeBlobs(s, layer, dir, perFile, wait); err != nil {
		return nil, s, fmt.Errorf("land %s: %w (nothing landed)", s.Run, err)
	}
	rep := &Report{}
	for _, c := range wait {
		if c.Has(FlagConflict) {
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: c.Path, Why: "the host has changed it, or what leads to it, since the run started"})
		}
	}
	if len(perFile) > 0 {
		flagged := rep.Conflicts
		if rep, err = apply(s, dir, perFile, o); err != nil {
			return rep, s, err
		}
		rep.Conflicts = append(flagged, rep.Conflicts...)
	}
	if len(taken) > 0 {
		landDirs(s, layer, dir, taken, rep)
	}
	left := map[string]bool{}
	for _, cf := range rep.Conflicts {
		left[cf.Path] = true
	}
	leftUnder := func(p string) bool { // in a directory that was to land whole, and did not
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if taken[d] && left[d] {
				return true
			}
		}
		return false
	}
	for _, c := range land {
		if left[c.Path] || leftUnder(c.Path) {
			wait = append(wait, c)
		}
	}
	sortChanges(wait)
	rest := &Set{Run: s.Run, Workspace: s.Workspace, Started: s.Started, Captured: s.Captured, Changes: wait}
	if rest.Changes == nil {
		rest.Changes = []Change{}
	}
	for _, c := range wait {
		if c.Type == TypeFile && c.Kind != Deleted && c.SHA256 != c.OldSHA256 {
			rest.Bytes += c.Size
		}
	}
	rest.Digest = digest(rest)
	if len(wait) == 0 {
		return rep, rest, os.RemoveAll(rd)
	}
	// What landed is no longer the set's: its record goes first, so that
	// an interruption leaves the whole set, or the rest, never a record
	// of another set's paths.
	if err := os.Remove(filepath.Join(rd, appliedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, s, fmt.Errorf("land %s: %w", s.Run, err)
	}
	data, err := json.MarshalIndent(setJSON{rest.Run, bstr(rest.Workspace), rest.Started, rest.Captured, rest.Changes, rest.Bytes, rest.Digest}, "", "\t")
	if err != nil {
		return rep, s, err
	}
	if err := writeAtomic(rd, setFile, data); err != nil {
		return rep, s, fmt.Errorf("land %s: %w", s.Run, err)
	}
	dropBlobs(filepath.Join(rd, blobDir), rest)
	return rep, rest, nil
}

// dropBlobs removes from blobs what no change of s names.
func dropBlobs(blobs string, s *Set) {
	need := map[string]bool{}
	for _, c := range s.Changes {
		need[c.SHA256] = true
	}
	ents, err := os.ReadDir(blobs)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !need[e.Name()] {
			os.Remove(filepath.Join(blobs, e.Name()))
		}
	}
}

// takeable splits land, the changes of s that land, into the added
// directories that land whole by a rename from the layer (outermost only)
// and the rest, less what those directories hold. A directory lands whole
// when Capture saw it and everything under it as plain, owned as o gives
// new paths, and nothing under it is held or anything but added.
func takeable(s *Set, land []Change, held, heldDirs map[string]bool, o ApplyOptions) (taken map[string]bool, rest []Change) {
	if s.upper == nil {
		return nil, land
	}
	bad := map[string]bool{} // directories something under them keeps from landing whole
	mark := func(p string) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if bad[d] {
				return
			}
			bad[d] = true
		}
	}
	for _, c := range s.Changes {
		e, ok := s.upper[c.Path]
		plain := ok && e.plain && c.Kind == Added && c.Type != TypeSpecial &&
			(o.Owner == nil || int(e.uid) == o.Owner[0] && int(e.gid) == o.Owner[1])
		if !plain || held[c.Path] || heldDirs[c.Path] {
			mark(c.Path)
			bad[c.Path] = bad[c.Path] || !plain || held[c.Path]
		}
	}
	for _, c := range s.Changes { // a path deleted and added: its old goes first
		if c.Kind == Deleted {
			bad[c.Path] = true
		}
	}
	taken = map[string]bool{}
	under := func(p string) bool {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if taken[d] {
				return true
			}
		}
		return false
	}
	for _, c := range land { // sorted: a directory before what it holds
		switch {
		case under(c.Path):
		case c.Kind == Added && c.Type == TypeDir && !bad[c.Path]:
			taken[c.Path] = true
		default:
			rest = append(rest, c)
		}
	}
	return taken, rest
}

// landDirs renames each directory of taken from the layer into place, if
// nothing has taken its name on the host, and reports it and everything
// under it applied; else a conflict, and what it holds waits.
func landDirs(s *Set, layer *os.File, dir string, taken map[string]bool, rep *Report) {
	root, err := openRoot(s.Workspace)
	if err != nil {
		for p := range taken {
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: p, Why: err.Error()})
		}
		return
	}
	defer root.Close()
	upper, err := openBeneath(layer, "upper", unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		for p := range taken {
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: p, Why: "upper layer: " + err.Error()})
		}
		return
	}
	defer upper.Close()
	done := map[string]bool{}
	for p := range taken {
		if err := landDir(s, upper, root, p); err != nil {
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: p, Why: err.Error()})
			continue
		}
		done[p] = true
	}
	var landed []string
	for _, c := range s.Changes {
		for d := c.Path; d != "."; d = path.Dir(d) {
			if done[d] {
				landed = append(landed, c.Path)
				break
			}
		}
	}
	rep.Applied = append(rep.Applied, landed...)
	rep.sort()
	unshareBlobs(s, dir, done)
}

// landDir renames the upper's directory rel, the one Capture saw, to the
// same place in the workspace root, where nothing may be.
func landDir(s *Set, upper, root *os.File, rel string) error {
	parent, name := path.Split(rel)
	parent = strings.TrimSuffix(parent, "/")
	if parent == "" {
		parent = "."
	}
	from, err := openBeneath(upper, parent, unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		return fmt.Errorf("upper layer: %w", err)
	}
	defer from.Close()
	st, err := lstatAt(from, name)
	if e := s.upper[rel]; err != nil || st == nil || st.Ino != e.ino || st.Ctim.Nano() != e.ctime || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("the layer's directory is not the one captured")
	}
	to, err := openBeneath(root, parent, unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath|unix.RESOLVE_NO_XDEV)
	if err != nil {
		return err
	}
	defer to.Close()
	err = unix.Renameat2(int(from.Fd()), name, int(to.Fd()), name, unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("the host has made it since the run started")
	case err != nil:
		return fmt.Errorf("rename: %w", err)
	}
	return nil
}

// unshareBlobs gives a blob that a file of a directory landed whole shares
// its inode with (it was linked from the layer) a copy of its own, where a
// change still waiting names it: the landed file may change from now on.
func unshareBlobs(s *Set, dir string, done map[string]bool) {
	in := func(p string) bool {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if done[d] {
				return true
			}
		}
		return false
	}
	landed, other := map[string]bool{}, map[string]bool{}
	for _, c := range s.Changes {
		if c.Type != TypeFile || c.Kind == Deleted {
			continue
		}
		if in(c.Path) {
			landed[c.SHA256] = true
		} else {
			other[c.SHA256] = true
		}
	}
	blobs := filepath.Join(dir, s.Run, blobDir)
	for sum := range landed {
		if !other[sum] {
			continue
		}
		b := filepath.Join(blobs, sum)
		if err := copyBlob(b, blobs, sum); err != nil {
			os.Remove(b) // what names it fails to apply, and says so
		}
	}
}

// copyBlob replaces the blob sum in blobs with a copy of the file at
// from: a file of its own.
func copyBlob(from, blobs, sum string) error {
	f, err := os.OpenFile(from, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return writeBlob(f, blobs, sum, fi.Size())
}

// makeBlobs makes the blobs Capture left to be made (Set.unmade) of the
// files among the lists, by linking the layer's file, the one Capture
// read (its inode), into the blobs; or, where it cannot be linked, by a
// copy checked against the hash.
func makeBlobs(s *Set, layer *os.File, dir string, lists ...[]Change) error {
	if len(s.unmade) == 0 {
		return nil
	}
	upper, err := openBeneath(layer, "upper", unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		return fmt.Errorf("upper layer: %w", err)
	}
	defer upper.Close()
	blobs, err := os.Open(filepath.Join(dir, s.Run, blobDir))
	if err != nil {
		return err
	}
	defer blobs.Close()
	for _, list := range lists {
		for _, c := range list {
			if !s.unmade[c.Path] {
				continue
			}
			if err := makeBlob(s, upper, blobs, c); err != nil {
				return fmt.Errorf("%q: %w", c.Path, err)
			}
			delete(s.unmade, c.Path)
		}
	}
	return nil
}

func makeBlob(s *Set, upper, blobs *os.File, c Change) error {
	f, err := openBeneath(upper, c.Path, unix.O_RDONLY|unix.O_NONBLOCK, resolveBeneath)
	if err != nil {
		return fmt.Errorf("upper layer: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if e := s.upper[c.Path]; st.Ino != e.ino || st.Ctim.Nano() != e.ctime || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != c.Size {
		return fmt.Errorf("the layer's file is not the one captured")
	}
	if err := linkFile(f, blobs, c.SHA256); err == nil || errors.Is(err, unix.EEXIST) {
		return nil
	}
	return writeBlob(f, blobs.Name(), c.SHA256, c.Size)
}

// writeBlob copies f, size bytes whose hash is sum, into blobs as the
// blob sum, through a temporary file renamed into place once the content
// is checked.
func writeBlob(f *os.File, blobs, sum string, size int64) error {
	tmp, err := os.CreateTemp(blobs, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(f, size+1))
	if err != nil {
		return err
	}
	if n != size || hex.EncodeToString(h.Sum(nil)) != sum {
		return fmt.Errorf("the file changed since it was captured")
	}
	return os.Rename(tmp.Name(), filepath.Join(blobs, sum))
}

// sameMount reports whether the layer and the workspace are on one mount,
// where a directory can be renamed from one to the other.
func sameMount(layer *os.File, workspace string) bool {
	var a, b unix.Statx_t
	if unix.Statx(int(layer.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &a) != nil ||
		unix.Statx(unix.AT_FDCWD, workspace, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &b) != nil {
		return false
	}
	return a.Mask&b.Mask&unix.STATX_MNT_ID != 0 && a.Mnt_id == b.Mnt_id
}
