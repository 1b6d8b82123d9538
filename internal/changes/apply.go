package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ApplyOptions adjust Apply.
type ApplyOptions struct {
	// Owner, when set (cordon running as root), owns the files and
	// directories Apply adds; a modified file keeps its owner.
	Owner *[2]int
	// stopAfter, in tests, ends Apply after so many changes, as a kill
	// would.
	stopAfter int
}

// Conflict is a change left alone, and why.
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// Report says what Apply did with each selected change.
type Report struct {
	Applied   []string   `json:"applied"`
	Already   []string   `json:"already"`
	Refused   []string   `json:"refused"`
	Conflicts []Conflict `json:"conflicts"`
}

// Apply lands the selected changes of s (all without paths) on the host's
// workspace, and records what landed in dir/run/applied.json. A change
// whose host path changed since the run started (or since the capture) is
// a conflict, left alone and reported; one already in place counts as
// done, so that an apply that was interrupted can be run again.
func Apply(s *Set, dir string, paths []string, o ApplyOptions) (*Report, error) {
	sel, err := s.Select(paths)
	if err != nil {
		return nil, err
	}
	root, err := openRoot(s.Workspace)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	a := &applier{s: s, root: root, blobs: filepath.Join(dir, s.Run, blobDir), o: o, rep: &Report{}, buf: make([]byte, 256<<10)}
	for i, c := range order(sel) {
		if o.stopAfter > 0 && i == o.stopAfter {
			return a.rep, errors.New("stopped")
		}
		if c.Has(FlagSpecial) {
			a.rep.Refused = append(a.rep.Refused, c.Path)
			continue
		}
		done, why, err := a.one(c)
		switch {
		case err != nil:
			a.rep.Conflicts = append(a.rep.Conflicts, Conflict{c.Path, err.Error()})
		case why != "":
			a.rep.Conflicts = append(a.rep.Conflicts, Conflict{c.Path, why})
		case done:
			a.rep.Already = append(a.rep.Already, c.Path)
		default:
			a.rep.Applied = append(a.rep.Applied, c.Path)
		}
	}
	unix.Syncfs(root)
	landed := append(slices.Clone(s.Applied), a.rep.Applied...)
	landed = append(landed, a.rep.Already...)
	slices.Sort(landed)
	landed = slices.Compact(landed)
	b, _ := json.Marshal(landed)
	if err := writeAtomic(filepath.Join(dir, s.Run), appliedFile, b); err != nil {
		return a.rep, fmt.Errorf("recording what landed: %w", err)
	}
	s.Applied = landed
	return a.rep, nil
}

// order puts changes in the order they can land: deletions that make way
// for a path of another type (deepest first), added directories (shallow
// first), files, links and modes, then the other deletions, deepest first.
func order(cs []Change) []Change {
	added := map[string]bool{}
	for _, c := range cs {
		if c.Kind != Deleted {
			added[c.Path] = true
		}
	}
	makesWay := func(c Change) bool {
		for p := c.Path; p != "."; p = path.Dir(p) {
			if added[p] {
				return true
			}
		}
		return false
	}
	phase := func(c Change) int {
		switch {
		case c.Kind == Deleted && makesWay(c):
			return 0
		case c.Kind == Added && c.Type == Dir:
			return 1
		case c.Kind != Deleted:
			return 2
		}
		return 3
	}
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(x, y Change) int {
		px, py := phase(x), phase(y)
		if px != py {
			return px - py
		}
		dx, dy := strings.Count(x.Path, "/"), strings.Count(y.Path, "/")
		switch px {
		case 0, 3:
			return dy - dx
		case 1:
			return dx - dy
		}
		return 0
	})
	return out
}

type applier struct {
	s     *Set
	root  int
	blobs string
	o     ApplyOptions
	rep   *Report
	buf   []byte
}

// one lands c: done reports it was already in place, why a conflict.
func (a *applier) one(c Change) (done bool, why string, err error) {
	dir, name := path.Split(c.Path)
	parent, err := openLower(a.root, relOr(strings.TrimSuffix(dir, "/")), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		if c.Kind == Deleted && errors.Is(err, unix.ENOENT) {
			return true, "", nil
		}
		return false, "", fmt.Errorf("its directory on the host: %w", err)
	}
	defer unix.Close(parent)
	var st unix.Stat_t
	var cur *Stat
	switch err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		cur = statOf(&st)
	case !errors.Is(err, unix.ENOENT):
		return false, "", err
	}
	if a.inPlace(c, parent, name, cur) {
		return true, "", nil
	}
	if why := a.conflict(c, cur); why != "" {
		return false, why, nil
	}
	switch {
	case c.Kind == Deleted && c.Type == Dir:
		if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil {
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				return false, "the host's directory holds entries the run did not see", nil
			}
			return false, "", err
		}
	case c.Kind == Deleted:
		return false, "", unix.Unlinkat(parent, name, 0)
	case c.Type == Dir && c.Kind == Added && cur == nil:
		if err := unix.Mkdirat(parent, name, c.Mode&0o777); err != nil {
			return false, "", err
		}
		if err := unix.Fchmodat(parent, name, applied(c.Mode), 0); err != nil {
			return false, "", err
		}
		if o := a.o.Owner; o != nil {
			return false, "", unix.Fchownat(parent, name, o[0], o[1], unix.AT_SYMLINK_NOFOLLOW)
		}
	case c.Type == Dir:
		return false, "", unix.Fchmodat(parent, name, applied(c.Mode), 0)
	case c.Type == Symlink:
		return false, "", a.place(c, parent, name, cur, func(tmp string) error { return unix.Symlinkat(c.Target, parent, tmp) })
	default:
		return false, "", a.place(c, parent, name, cur, func(tmp string) error { return a.write(c, parent, tmp, cur) })
	}
	return false, "", nil
}

// applied is the mode a change lands with: never setuid or setgid.
func applied(mode uint32) uint32 { return mode & 0o1777 }

// place makes the new entry under a temporary name of its directory, then
// renames it over name.
func (a *applier) place(c Change, parent int, name string, cur *Stat, make func(tmp string) error) error {
	sum := sha256.Sum256([]byte(a.s.Run + "\x00" + c.Path))
	tmp := ".cordon-apply-" + hex.EncodeToString(sum[:6])
	unix.Unlinkat(parent, tmp, 0) // left by an apply that was killed
	if err := make(tmp); err != nil {
		unix.Unlinkat(parent, tmp, 0)
		return err
	}
	if c.Type == Symlink && a.o.Owner != nil && cur == nil {
		unix.Fchownat(parent, tmp, a.o.Owner[0], a.o.Owner[1], unix.AT_SYMLINK_NOFOLLOW)
	}
	if err := unix.Renameat(parent, tmp, parent, name); err != nil {
		unix.Unlinkat(parent, tmp, 0)
		return err
	}
	return nil
}

// write copies c's content from its blob into tmp in parent, with its
// mode and owner.
func (a *applier) write(c Change, parent int, tmp string, cur *Stat) error {
	src, err := os.Open(filepath.Join(a.blobs, c.SHA256))
	if err != nil {
		return fmt.Errorf("its content: %w", err)
	}
	defer src.Close()
	fd, err := unix.Openat(parent, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(fd), tmp)
	defer dst.Close()
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	switch {
	case cur != nil && cur.Type == File && os.Geteuid() == 0:
		var st unix.Stat_t
		if err := unix.Fstatat(parent, path.Base(c.Path), &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
	case a.o.Owner != nil:
		if err := unix.Fchown(fd, a.o.Owner[0], a.o.Owner[1]); err != nil {
			return err
		}
	}
	return unix.Fchmod(fd, applied(c.Mode))
}

// inPlace reports whether the host already shows c's new state.
func (a *applier) inPlace(c Change, parent int, name string, cur *Stat) bool {
	if c.Kind == Deleted {
		return cur == nil
	}
	if cur == nil || cur.Type != c.Type {
		return false
	}
	switch c.Type {
	case Dir:
		return cur.Mode == applied(c.Mode)
	case Symlink:
		t, err := readlink(parent, name)
		return err == nil && t == c.Target
	}
	if cur.Size != c.Size || cur.Mode != applied(c.Mode) {
		return false
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	sum, err := hashOf(f, sha256.New(), a.buf)
	return err == nil && sum == c.SHA256
}

// conflict says why c may not land on the host's path in its state cur:
// the host changed it during the run, or since the capture.
func (a *applier) conflict(c Change, cur *Stat) string {
	base := c.Base
	if c.Kind == Added && c.Type == Dir && cur != nil && cur.Type == Dir {
		return "" // the directory is there already; its entries are their own changes
	}
	switch {
	case base == nil && cur != nil:
		return "the host has created this path since the run started"
	case base == nil:
		return ""
	case base.CtimeNS >= a.s.Started.UnixNano():
		return "the host changed this path while the run went on"
	case cur == nil:
		return "the host has removed this path since the run"
	case cur.Type != base.Type || cur.Ino != base.Ino || cur.Dev != base.Dev:
		return "the host has replaced this path since the run"
	case base.Type == Dir:
		if cur.Mode != base.Mode {
			return "the host changed this directory's mode since the run"
		}
		return ""
	case cur.Size != base.Size || cur.MtimeNS != base.MtimeNS || cur.CtimeNS != base.CtimeNS || cur.Mode != base.Mode:
		return "the host changed this path since the run"
	}
	return ""
}
