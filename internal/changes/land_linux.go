package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Land applies at once what rv's policy does not hold of s, a set just
// captured from a guarded workspace's layer (with Limits.Link), and leaves
// the rest waiting as the set: its set.json is rewritten to hold only the
// held changes, under their own digest, which is what an approval covers.
// Held with a change are the changes beneath it when it is an added
// directory (they land with it or not at all) and the deletion of every
// directory above it (which cannot go while it stays); a change Apply
// leaves alone (a conflict: the host changed the path during the run)
// stays in the set too, for a person to see. The set is returned as it is
// left, with no changes when nothing waits (its directory is then
// removed). Nothing is landed when s cannot be read or rewritten.
func Land(s *Set, dir string, rv Review, o ApplyOptions) (*Report, *Set, error) {
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
		if pol.NeedsApproval(c.Path, c.Kind, c.Flags) == "" {
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
	rep := &Report{}
	if len(land) > 0 {
		if rep, err = apply(s, dir, land, o); err != nil {
			return rep, s, err
		}
	}
	left := map[string]bool{}
	for _, cf := range rep.Conflicts {
		left[cf.Path] = true
	}
	for _, c := range land {
		if left[c.Path] {
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
