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
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Apply lands the changes of s that paths select (as Select does; none
// selects all) on the host workspace, with their blobs from dir
// (STATE/changes). Added directories go first (shallowest first), then
// files and links, then modes, then deletions (deepest first; a directory
// only when empty); the old of a path whose type changed is deleted before
// the new is added. Each path is checked against its state at capture: a
// host change since (or during the run) is a conflict, reported, and the
// path left alone; a path already in its new state is reported as such.
// What landed is recorded in dir/RUN/applied.json. An error means Apply
// could not start or record its outcome; problems with single paths are
// in the Report.
func Apply(s *Set, dir string, paths []string, o ApplyOptions) (*Report, error) {
	sel, err := s.Select(paths)
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", s.Run, err)
	}
	return apply(s, dir, sel, o)
}

// apply lands sel, changes of s, and the added directories above them.
func apply(s *Set, dir string, sel []Change, o ApplyOptions) (*Report, error) {
	if digest(s) != s.Digest {
		return nil, fmt.Errorf("apply %s: the set does not match its digest", s.Run)
	}
	rd, err := runDir(dir, s.Run)
	if err != nil {
		return nil, err
	}
	sel = withParents(s, sel)
	root, err := openRoot(s.Workspace)
	if err != nil {
		return nil, fmt.Errorf("apply %s: workspace: %w", s.Run, err)
	}
	defer root.Close()
	a := &applier{set: s, blobs: filepath.Join(rd, blobDir), root: root, o: o,
		rep: &Report{}, blocked: map[string]string{}, made: map[string]bool{}, buf: make([]byte, 128<<10)}
	if o.Take {
		a.uses = map[string]int{}
		for _, c := range s.Changes {
			if c.Type == TypeFile && c.Kind != Deleted {
				a.uses[c.SHA256]++
			}
		}
	}
	a.run(sel)
	if a.blobsDir != nil {
		a.blobsDir.Close()
	}
	a.rep.sort()
	// What a guarded run lands is synced no more than a direct run's
	// writes are.
	if !o.Take {
		if err := unix.Syncfs(int(root.Fd())); err != nil {
			return a.rep, fmt.Errorf("apply %s: sync: %w", s.Run, err)
		}
	}
	if err := a.record(rd); err != nil {
		return a.rep, fmt.Errorf("apply %s: %w", s.Run, err)
	}
	return a.rep, nil
}

// withParents adds to sel the added directories above what it holds,
// without which it cannot land.
func withParents(s *Set, sel []Change) []Change {
	if len(sel) == len(s.Changes) {
		return sel
	}
	need := map[string]bool{}
	for _, c := range sel {
		for p := path.Dir(c.Path); p != "."; p = path.Dir(p) {
			need[p] = true
		}
	}
	for _, c := range sel {
		if c.Kind == Added && c.Type == TypeDir {
			delete(need, c.Path)
		}
	}
	var out []Change
	for _, c := range s.Changes {
		if c.Kind == Added && c.Type == TypeDir && need[c.Path] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return sel
	}
	out = append(out, sel...)
	sortChanges(out)
	return out
}

// applier lands the changes of one set.
type applier struct {
	set      *Set
	blobs    string
	root     *os.File
	o        ApplyOptions
	rep      *Report
	blocked  map[string]string // added directories not applied, and why
	made     map[string]bool   // added directories made now
	keep     bool              // keep the last directory open
	kept     *os.File          // the directory kept open
	keptDir  string            // its path, as path.Split gives it
	landed   []string
	buf      []byte
	uses     map[string]int // for Take: the changes of the set that name each blob
	blobsDir *os.File       // for Take: the blobs' directory, once opened
}

// run applies sel in order.
func (a *applier) run(sel []Change) {
	replaced := map[string]bool{}
	for _, c := range sel {
		if c.Kind == Added {
			replaced[c.Path] = true
		}
	}
	var early, late, dirs, files, modes []Change
	for _, c := range sel {
		switch {
		case c.Kind == Deleted && replacedAt(c.Path, replaced):
			early = append(early, c)
		case c.Kind == Deleted:
			late = append(late, c)
		case c.Type == TypeSpecial:
			a.refuse(c.Path)
		case c.Type == TypeDir && c.Kind == Added:
			dirs = append(dirs, c)
			modes = append(modes, c)
		case c.Type == TypeDir:
			modes = append(modes, c)
		default:
			files = append(files, c)
		}
	}
	deepestFirst(early)
	deepestFirst(late)
	for _, c := range early {
		a.do(c, a.delete)
	}
	for _, c := range dirs {
		a.do(c, a.mkdir)
	}
	// Files and links neither make nor remove directories: the directory
	// of one is kept open for the next in it.
	a.keep = true
	for _, c := range files {
		a.do(c, a.write)
	}
	a.keep = false
	a.drop()
	for _, c := range modes {
		a.do(c, a.chmod)
	}
	for _, c := range late {
		a.do(c, a.delete)
	}
}

// replacedAt reports whether p or a directory above it is added anew.
func replacedAt(p string, replaced map[string]bool) bool {
	for ; p != "."; p = path.Dir(p) {
		if replaced[p] {
			return true
		}
	}
	return false
}

// deepestFirst orders deletions so that what is in a directory goes
// before it.
func deepestFirst(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		di, dj := strings.Count(cs[i].Path, "/"), strings.Count(cs[j].Path, "/")
		if di != dj {
			return di > dj
		}
		return cs[i].Path > cs[j].Path
	})
}

// outcome of one step.
type outcome int

const (
	done    outcome = iota // applied
	already                // found in its new state
	skip                   // nothing to report (yet)
)

// conflict is a step's refusal, with the reason.
type conflict struct{ why string }

func (c *conflict) Error() string { return c.why }

// sort orders a report's lists by path.
func (r *Report) sort() {
	for _, l := range []*[]string{&r.Applied, &r.Already, &r.Refused} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	sort.SliceStable(r.Conflicts, func(i, j int) bool { return r.Conflicts[i].Path < r.Conflicts[j].Path })
}

// parentError is a conflict on the way to a path, with its cause.
type parentError struct {
	conflict
	err error
}

func conflictf(format string, args ...any) error {
	return &conflict{fmt.Sprintf(format, args...)}
}

// do runs step for c in the directory that holds it, and reports.
func (a *applier) do(c Change, step func(c Change, d *os.File, name string) (outcome, error)) {
	for p := path.Dir(c.Path); p != "."; p = path.Dir(p) {
		if why, ok := a.blocked[p]; ok {
			a.conflict(c, fmt.Sprintf("directory %q was not applied: %s", p, why))
			return
		}
	}
	d, name, err := a.parentOf(c.Path)
	var pe *parentError
	if errors.As(err, &pe) && c.Kind == Deleted && (errors.Is(pe.err, unix.ENOENT) || errors.Is(pe.err, unix.ENOTDIR)) {
		// What would hold it is gone: so is it.
		a.rep.Already = appendPath(a.rep.Already, c.Path)
		a.landed = append(a.landed, c.Path)
		return
	}
	if err != nil {
		a.conflict(c, err.Error())
		return
	}
	if !a.keep {
		defer d.Close()
	}
	out, err := step(c, d, name)
	var cf *conflict
	switch {
	case errors.As(err, &cf):
		a.conflict(c, cf.why)
	case err != nil:
		a.conflict(c, err.Error())
	case out == done:
		a.rep.Applied = appendPath(a.rep.Applied, c.Path)
		a.landed = append(a.landed, c.Path)
		a.placed(c, d, name)
	case out == already:
		a.rep.Already = appendPath(a.rep.Already, c.Path)
		a.landed = append(a.landed, c.Path)
		a.placed(c, d, name)
	}
}

// placed notes the host's state of name in d, c's path, just landed: a
// host change a moment later is one (see Remember).
func (a *applier) placed(c Change, d *os.File, name string) {
	if c.Kind == Deleted {
		return
	}
	st, err := lstatAt(d, name)
	if err != nil || st == nil {
		return
	}
	if a.rep.placed == nil {
		a.rep.placed = map[string]placedStat{}
	}
	a.rep.placed[c.Path] = placedStat{st.Ctim.Nano(), st.Ino, st.Mode & 07777}
}

func appendPath(list []string, p string) []string {
	if len(list) > 0 && list[len(list)-1] == p {
		return list
	}
	return append(list, p)
}

func (a *applier) conflict(c Change, why string) {
	if c.Kind == Added && c.Type == TypeDir {
		a.blocked[c.Path] = why
	}
	a.rep.Conflicts = append(a.rep.Conflicts, Conflict{Path: c.Path, Why: why})
}

func (a *applier) refuse(p string) { a.rep.Refused = appendPath(a.rep.Refused, p) }

// parentOf opens the directory that holds rel, or gives the one kept
// open.
func (a *applier) parentOf(rel string) (*os.File, string, error) {
	dir, name := path.Split(rel)
	if a.kept != nil && a.keptDir == dir {
		return a.kept, name, nil
	}
	a.drop()
	d, name, err := a.parent(rel)
	if err == nil && a.keep {
		a.kept, a.keptDir = d, dir
	}
	return d, name, err
}

// drop closes the directory kept open.
func (a *applier) drop() {
	if a.kept != nil {
		a.kept.Close()
		a.kept = nil
	}
}

// parent opens the directory that holds rel, from the workspace's root,
// following no link and crossing no mount.
func (a *applier) parent(rel string) (*os.File, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	fd, err := unix.Openat2(int(a.root.Fd()), dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolveBeneath | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		why := err.Error()
		switch {
		case errors.Is(err, unix.ELOOP):
			why = "a symbolic link is on the way"
		case errors.Is(err, unix.EXDEV):
			why = "the way leaves the workspace's file system"
		case errors.Is(err, unix.ENOENT):
			why = "it does not exist"
		case errors.Is(err, unix.ENOTDIR):
			why = "it is not a directory"
		}
		return nil, "", &parentError{conflict{fmt.Sprintf("directory %q: %s", dir, why)}, err}
	}
	return os.NewFile(uintptr(fd), dir), name, nil
}

// current is the host's state of name in d (nil: absent), and whether it
// is still what Capture saw and the run did not change.
func (a *applier) current(c Change, d *os.File, name string) (*unix.Stat_t, bool, error) {
	st, err := lstatAt(d, name)
	if err != nil {
		return nil, false, err
	}
	b := c.Base
	if b == nil || st == nil {
		// Absent as it was; unless it is one cordon landed that the host
		// has removed since (a conflict, Capture says).
		return st, b == nil && st == nil && !c.Has(FlagConflict), nil
	}
	// Changed during the run, as Capture judged it (a change cordon
	// itself landed from the same layer is not: Limits.Landed).
	if c.Has(FlagConflict) || typeOf(st.Mode) != b.Type || st.Ino != b.Ino {
		return st, false, nil
	}
	if b.Type == TypeDir { // its times change as what is in it is applied
		return st, st.Mode&07777 == b.Mode, nil
	}
	return st, st.Size == b.Size && st.Mtim.Nano() == b.MtimeNS && st.Ctim.Nano() == b.CtimeNS, nil
}

// landedAs reports whether the host's st (name in d) is c's new state.
func (a *applier) landedAs(c Change, d *os.File, name string, st *unix.Stat_t) bool {
	if c.Kind == Deleted || st == nil {
		return c.Kind == Deleted && st == nil
	}
	if typeOf(st.Mode) != c.Type {
		return false
	}
	switch c.Type {
	case TypeSymlink:
		t, err := readlinkAt(d, name)
		return err == nil && t == c.Target
	case TypeDir:
		return st.Mode&0o777 == c.Mode&0o777
	case TypeFile:
		if st.Mode&0o777 != c.Mode&0o777 || st.Size != c.Size {
			return false
		}
		f, _, err := openFileAt(d, name)
		if err != nil {
			return false
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.CopyBuffer(h, f, a.buf); err != nil {
			return false
		}
		return hex.EncodeToString(h.Sum(nil)) == c.SHA256
	}
	return false
}

// check decides whether c may be applied to name in d: ok, or already
// landed, or a conflict.
func (a *applier) check(c Change, d *os.File, name string) (*unix.Stat_t, outcome, error) {
	st, same, err := a.current(c, d, name)
	if err != nil {
		return nil, skip, err
	}
	if same {
		return st, done, nil
	}
	if a.landedAs(c, d, name, st) {
		return st, already, nil
	}
	switch {
	case c.Base == nil && st == nil:
		return st, skip, conflictf("the host has removed it since it landed")
	case c.Base == nil:
		return st, skip, conflictf("the host has made it since the run started")
	case st == nil:
		return st, skip, conflictf("the host has removed it since the run started")
	default:
		return st, skip, conflictf("the host has changed it since the run started")
	}
}

// delete removes a file, link or empty directory.
func (a *applier) delete(c Change, d *os.File, name string) (outcome, error) {
	st, out, err := a.check(c, d, name)
	if err != nil || out == already {
		return out, err
	}
	flags := 0
	if typeOf(st.Mode) == TypeDir {
		flags = unix.AT_REMOVEDIR
	}
	err = unix.Unlinkat(int(d.Fd()), name, flags)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return skip, conflictf("the host has put something new in it")
	}
	if err != nil {
		return skip, fmt.Errorf("remove: %w", err)
	}
	return done, nil
}

// mkdir makes an added directory, open to its owner until chmod gives it
// its mode.
func (a *applier) mkdir(c Change, d *os.File, name string) (outcome, error) {
	st, err := lstatAt(d, name)
	if err != nil {
		return skip, err
	}
	if st != nil {
		m := st.Mode & 0o777
		if typeOf(st.Mode) == TypeDir && (m == c.Mode&0o777 || m == c.Mode&0o777|0o700) {
			return skip, nil
		}
		return skip, conflictf("the host has made it since the run started")
	}
	if err := unix.Mkdirat(int(d.Fd()), name, 0o700); err != nil {
		return skip, fmt.Errorf("mkdir: %w", err)
	}
	f, err := openBeneath(d, name, unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		return skip, err
	}
	defer f.Close()
	if err := f.Chmod(os.FileMode(c.Mode&0o777 | 0o700)); err != nil {
		return skip, err
	}
	if a.o.Owner != nil {
		if err := f.Chown(a.o.Owner[0], a.o.Owner[1]); err != nil {
			return skip, err
		}
	}
	a.made[c.Path] = true
	a.wrote(c.Path, true)
	return skip, nil // reported by chmod
}

// chmod gives a directory its mode: an added one, or one whose mode changed.
func (a *applier) chmod(c Change, d *os.File, name string) (outcome, error) {
	var st *unix.Stat_t
	out := done
	if c.Kind == Added {
		var err error
		if st, err = lstatAt(d, name); err != nil || st == nil || typeOf(st.Mode) != TypeDir {
			return skip, conflictf("the host has changed it since it was made")
		}
		if !a.made[c.Path] && st.Mode&07777 == c.Mode&^0o6000 {
			out = already
		}
	} else {
		var err error
		if st, out, err = a.check(c, d, name); err != nil || out == already {
			return out, err
		}
	}
	f, err := openBeneath(d, name, unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		return skip, err
	}
	defer f.Close()
	var fst unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &fst); err != nil || fst.Ino != st.Ino {
		return skip, conflictf("the host has replaced it")
	}
	if err := unix.Fchmod(int(f.Fd()), c.Mode&^0o6000); err != nil {
		return skip, fmt.Errorf("chmod: %w", err)
	}
	return out, nil
}

// tmpName is the temporary name a path's new content is written under:
// the same for the same run and path, so that a second Apply removes what
// an interrupted one left.
func (a *applier) tmpName(p string) string {
	sum := sha256.Sum256([]byte(a.set.Run + "\x00" + p))
	return ".cordon-apply-" + hex.EncodeToString(sum[:])[:12]
}

// write lands a file or a link: written under a temporary name, then
// renamed into place. A file whose mode alone changed is chmodded.
func (a *applier) write(c Change, d *os.File, name string) (outcome, error) {
	st, out, err := a.check(c, d, name)
	if err != nil || out == already {
		return out, err
	}
	if c.Kind == Modified && c.Type == TypeFile && c.OldType == TypeFile && c.SHA256 == c.OldSHA256 {
		return a.chmodFile(c, d, name, st)
	}
	taken := a.uses[c.SHA256] == 1 && c.Type == TypeFile
	if taken && c.Base == nil {
		if out, err, ok := a.takeUnnamed(c, d, name); ok {
			return out, err
		}
		taken = false
	}
	if c.Type == TypeFile && c.Base == nil {
		if out, err, ok := a.writeUnnamed(c, d, name); ok {
			return out, err
		}
	}
	tmp := a.tmpName(c.Path)
	create := func() error {
		if c.Type == TypeSymlink {
			return a.symlink(c, d, tmp)
		}
		if taken {
			if err, ok := a.take(c, d, tmp, st, 0); ok {
				return err
			}
			taken = false
		}
		return a.file(c, d, tmp, st)
	}
	err = create()
	if errors.Is(err, unix.EEXIST) { // left by an interrupted apply
		if err := unix.Unlinkat(int(d.Fd()), tmp, 0); err != nil {
			return skip, fmt.Errorf("remove %s: %w", tmp, err)
		}
		err = create()
	}
	if err == nil {
		a.wrote(c.Path, false)
		err = a.rename(c, d, tmp, name)
	}
	if err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		return skip, err
	}
	a.wrote(c.Path, true)
	return done, nil
}

// writeUnnamed lands an added file as an unnamed one in d (O_TMPFILE)
// linked at name once written: nothing is left behind if Apply is killed,
// and a name the host has made since is not replaced. ok is false when
// the file system cannot do it.
func (a *applier) writeUnnamed(c Change, d *os.File, name string) (out outcome, err error, ok bool) {
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return skip, nil, false
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := a.fill(c, f, nil); err != nil {
		return skip, err, true
	}
	a.wrote(c.Path, false)
	err = linkFile(f, d, name)
	if errors.Is(err, unix.EEXIST) {
		return skip, conflictf("the host has made it since the run started"), true
	}
	if err != nil {
		return skip, fmt.Errorf("link: %w", err), true
	}
	a.wrote(c.Path, true)
	return done, nil, true
}

// takeUnnamed lands an added file by renaming its blob to name in d, if
// nothing is there (see take).
func (a *applier) takeUnnamed(c Change, d *os.File, name string) (out outcome, err error, ok bool) {
	err, ok = a.take(c, d, name, nil, unix.RENAME_NOREPLACE)
	if !ok {
		return skip, nil, false
	}
	if errors.Is(err, unix.EEXIST) {
		return skip, conflictf("the host has made it since the run started"), true
	}
	if err != nil {
		return skip, err, true
	}
	a.wrote(c.Path, false)
	a.wrote(c.Path, true)
	return done, nil, true
}

// take moves c's blob to name in d (renameat2 with flags), with c's mode
// less its set-id bits, its owner, and none of the extended attributes
// the sandbox may have set (a copy has none either). ok is false, and
// nothing was moved, where the blob cannot be taken: not the regular file
// of c's size the capture linked, on another file system, or holding an
// attribute that cannot be removed.
func (a *applier) take(c Change, d *os.File, name string, old *unix.Stat_t, flags uint) (err error, ok bool) {
	if a.blobsDir == nil {
		d, err := os.Open(a.blobs)
		if err != nil {
			return nil, false
		}
		a.blobsDir = d
	}
	fd, err := unix.Openat(int(a.blobsDir.Fd()), c.SHA256, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), c.SHA256)
	defer f.Close()
	var st, dst unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || unix.Fstat(int(d.Fd()), &dst) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != c.Size || st.Nlink > 2 || st.Dev != dst.Dev {
		return nil, false
	}
	if !noXattrs(f) || !plainFlags(f) {
		return nil, false
	}
	chowned := false
	if uid, gid, own := a.owner(c, old); own && (int(st.Uid) != uid || int(st.Gid) != gid) {
		if err := unix.Fchown(int(f.Fd()), uid, gid); err != nil {
			return nil, false
		}
		chowned = true
	}
	if chowned || st.Mode&0o7777 != c.Mode&^0o6000 {
		if err := unix.Fchmod(int(f.Fd()), c.Mode&^0o6000); err != nil {
			return nil, false
		}
	}
	err = unix.Renameat2(int(a.blobsDir.Fd()), c.SHA256, int(d.Fd()), name, flags)
	if errors.Is(err, unix.EXDEV) {
		return nil, false
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		err = fmt.Errorf("rename: %w", err)
	}
	return err, true
}

// Inode flags a file system sets of itself (lsattr's e, N, h and I).
const (
	extentFlag     = 0x00080000
	inlineDataFlag = 0x10000000
	hugeFileFlag   = 0x00040000
	indexFlag      = 0x00001000 // a directory's hashed index
)

// plainFlags reports whether f has no inode flag (chattr: no-dump,
// synchronous, no-atime, ...) but those its file system sets itself: the
// sandbox may set some on what it writes, and a copy has none.
func plainFlags(f *os.File) bool {
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL)
	}
	return flags&^(extentFlag|inlineDataFlag|hugeFileFlag|indexFlag) == 0
}

// plainInode reports whether f has no extended attribute and no inode
// flag but those its file system sets itself.
func plainInode(f *os.File) bool {
	n, err := unix.Flistxattr(int(f.Fd()), nil)
	if err != nil && !errors.Is(err, unix.ENOTSUP) || n > 0 {
		return false
	}
	return plainFlags(f)
}

// noXattrs removes every extended attribute of f, and reports whether
// none is left.
func noXattrs(f *os.File) bool {
	buf := make([]byte, 4096)
	for range 2 {
		n, err := unix.Flistxattr(int(f.Fd()), buf)
		if errors.Is(err, unix.ENOTSUP) {
			return true
		}
		if err != nil {
			return false
		}
		if n == 0 {
			return true
		}
		for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
			unix.Fremovexattr(int(f.Fd()), name)
		}
	}
	return false
}

// file writes c's content to tmp in d (see fill).
func (a *applier) file(c Change, d *os.File, tmp string, old *unix.Stat_t) error {
	fd, err := unix.Openat(int(d.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	defer f.Close()
	if err := a.fill(c, f, old); err != nil {
		return err
	}
	return f.Close()
}

// fill writes c's content from its blob to f, with c's mode less its
// set-id bits and its owner; the blob must hold what the set says.
func (a *applier) fill(c Change, f *os.File, old *unix.Stat_t) error {
	blob, err := os.OpenFile(filepath.Join(a.blobs, c.SHA256), os.O_RDONLY|noFollow, 0)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	defer blob.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(f, h), blob, a.buf)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if n != c.Size || hex.EncodeToString(h.Sum(nil)) != c.SHA256 {
		return fmt.Errorf("its stored content does not match the set")
	}
	if err := unix.Fchmod(int(f.Fd()), c.Mode&^0o6000); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if uid, gid, ok := a.owner(c, old); ok {
		if err := unix.Fchown(int(f.Fd()), uid, gid); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	return nil
}

// owner is who a new or replaced path of c is given to, if anyone.
func (a *applier) owner(c Change, old *unix.Stat_t) (int, int, bool) {
	switch {
	case a.o.Owner == nil:
		return 0, 0, false
	case old != nil:
		return int(old.Uid), int(old.Gid), true
	}
	return a.o.Owner[0], a.o.Owner[1], true
}

// symlink makes c's link at tmp in d.
func (a *applier) symlink(c Change, d *os.File, tmp string) error {
	if err := unix.Symlinkat(c.Target, int(d.Fd()), tmp); err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	if uid, gid, ok := a.owner(c, nil); ok {
		if err := unix.Fchownat(int(d.Fd()), tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	return nil
}

// rename moves tmp onto name: for an added path only if nothing is there.
func (a *applier) rename(c Change, d *os.File, tmp, name string) error {
	var flags uint
	if c.Base == nil {
		flags = unix.RENAME_NOREPLACE
	}
	err := unix.Renameat2(int(d.Fd()), tmp, int(d.Fd()), name, flags)
	if errors.Is(err, unix.EEXIST) {
		return conflictf("the host has made it since the run started")
	}
	if err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	return nil
}

// chmodFile gives a file whose content did not change its new mode.
func (a *applier) chmodFile(c Change, d *os.File, name string, st *unix.Stat_t) (outcome, error) {
	f, fst, err := openFileAt(d, name)
	if err != nil {
		return skip, err
	}
	defer f.Close()
	if fst.Ino != st.Ino {
		return skip, conflictf("the host has replaced it")
	}
	if err := unix.Fchmod(int(f.Fd()), c.Mode&^0o6000); err != nil {
		return skip, fmt.Errorf("chmod: %w", err)
	}
	a.wrote(c.Path, true)
	return done, nil
}

func (a *applier) wrote(p string, placed bool) {
	if a.o.hook != nil {
		a.o.hook(p, placed)
	}
}

// record adds what landed to dir/RUN/applied.json.
func (a *applier) record(rd string) error {
	all := slices.Clone(a.set.Applied)
	all = append(all, a.landed...)
	slices.Sort(all)
	all = slices.Compact(all)
	j := appliedJSON{Digest: a.set.Digest}
	for _, p := range all {
		j.Applied = append(j.Applied, bstr(p))
	}
	data, err := json.MarshalIndent(j, "", "\t")
	if err != nil {
		return err
	}
	if err := writeAtomic(rd, appliedFile, data); err != nil {
		return err
	}
	a.set.Applied = all
	return nil
}
