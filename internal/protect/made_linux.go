package protect

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/obey"
)

// Made is a path of a writable bind that the host's tools obey (package
// obey) and that a run made or changed: direct mode cannot hold back what
// the catalog names below a bind's root, so it reports it once the run
// has ended.
type Made struct {
	// Rel is the path relative to the bind's root: the outermost one the
	// catalog names, or for a repository, the file in it that git, hg or
	// jj obeys.
	Rel string `json:"path"`
	// Tool is the catalog's name of what obeys it.
	Tool string `json:"tool"`
	// Created says the run made it (it was not there before): removing
	// it undoes the run's doing. Otherwise the run changed it.
	Created bool `json:"created,omitempty"`
	// Unreadable says it is a directory cordon could not list (the run
	// took away the permission to): what it holds was not looked at.
	Unreadable bool `json:"unreadable,omitempty"`
}

// Bounds of the look after a run: entries listed and directory levels. A
// tree past them is reported as not looked at in full.
const (
	MaxMadeEntries = 1 << 20
	MaxMadeDepth   = 64
	MaxMadeListed  = 100
)

// FindMade lists what the catalog names in the tree at root that was made
// or changed at or after since: a name of the catalog at any depth (a
// nested .git, .hg, .yarnrc.yml), a directory git would take as a
// repository (HEAD, objects and refs, whatever it is called), and
// cordon's profiles known by their content. complete is false when the
// tree was past the bounds. Nothing is followed: every path is reached
// from a descriptor of root, beneath it, without links.
//
// held are the paths a plan kept read-only or pinned (Plan.Entries): what
// they cover could not be changed, and is not looked at.
//
// index, when not "", is a file of cordon's own, outside every sandbox's
// view, where the look keeps what it found of the tree (each directory's
// inode and change time, and the paths worth a look every time): the next
// look lists only the directories whose change time moved, which no
// process can set back, and walks in full only what is new. Without it,
// or when it is not this tree's, every directory is listed.
func FindMade(root string, since time.Time, held []Entry, index string) (found []Made, complete bool, err error) {
	w, err := look(root, since.UnixNano(), held, index)
	if err != nil {
		return nil, false, err
	}
	return w.found, !w.cut, nil
}

// look walks the tree at root, in full or, with an index of it, what
// changed since the index was kept, and judges what changed at or after
// since (in nanoseconds; math.MaxInt64 judges nothing). On the way it
// keeps, in the index, the credentials and home directories the tree holds
// (see Sensitive), wherever they are.
func look(root string, since int64, held []Entry, index string) (*madeWalk, error) {
	root = filepath.Clean(root)
	d, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var rootSt unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &rootSt); err != nil {
		return nil, err
	}
	w := &madeWalk{d: d, since: since, budget: MaxMadeEntries, held: map[string]bool{}, seen: map[string]bool{}, homes: map[string]bool{}, real: root}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		w.real = real
	}
	for _, h := range Homes() {
		w.homes[h] = true
	}
	for _, e := range held {
		// Read-only paths could not change; of the pinned directories (on
		// the way to them), a .git has what git obeys in it held.
		w.held[e.Rel] = e.ReadOnly || path.Base(e.Rel) == ".git"
	}
	ix := heldIndex(root, rootSt)
	if ix == nil {
		ix = loadIndex(index, root, rootSt)
	}
	if ix != nil {
		w.ix = ix
		w.update()
	} else {
		w.ix = newIndex(root, rootSt)
		top, err := beneath(d, ".", unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil, err
		}
		w.list(os.NewFile(uintptr(top), root), ".", 0, func(string) bool { return true })
	}
	if !w.limited {
		keep(w.ix)
		if index != "" && w.dirty {
			w.ix.save(index)
		}
	}
	return w, nil
}

type madeWalk struct {
	d      *os.File
	since  int64
	budget int
	// cut says the look did not cover everything; limited, that it
	// stopped at its bounds of entries or depth, which limitErr says.
	cut, limited bool
	limitErr     *LimitError
	dirty        bool // the index learned something: worth writing
	held         map[string]bool
	found        []Made
	seen         map[string]bool // paths reported, or judged, in this look
	ix           *walkIndex      // what this look learns of the tree
	// homes are the host's home directories, real is the root's real
	// path, for the homes the tree holds.
	homes map[string]bool
	real  string
}

// limit records that the look stopped at one of its bounds: its entries,
// or its depth at the directory at.
func (w *madeWalk) limit(at ...string) {
	w.cut, w.limited = true, true
	if w.limitErr == nil {
		w.limitErr = &LimitError{Root: w.real, Entries: MaxMadeEntries}
		if len(at) > 0 {
			w.limitErr = &LimitError{Root: w.real, Depth: MaxMadeDepth, At: at[0]}
		}
	}
}

func (w *madeWalk) add(rel, tool string) {
	if w.seen["found:"+rel] {
		return
	}
	w.seen["found:"+rel] = true
	for _, f := range w.found {
		if f.Created && strings.HasPrefix(rel, f.Rel+"/") {
			return // the run made what holds it: reported as a whole
		}
	}
	if len(w.found) >= MaxMadeListed {
		w.cut = true
		return
	}
	w.found = append(w.found, Made{Rel: rel, Tool: tool, Created: w.born(rel)})
}

// born reports whether rel was made at or after since, where the file
// system keeps birth times.
func (w *madeWalk) born(rel string) bool {
	var stx unix.Statx_t
	return unix.Statx(int(w.d.Fd()), rel, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) == nil &&
		stx.Mask&unix.STATX_BTIME != 0 && stx.Btime.Sec*1e9+int64(stx.Btime.Nsec) >= w.since
}

func (w *madeWalk) stat(rel string) *unix.Stat_t {
	var st unix.Stat_t
	if unix.Fstatat(int(w.d.Fd()), rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	return &st
}

// list looks at the entries of the directory rel, open as f (which it
// closes), and lists the subdirectories descend says, each opened from its
// parent's descriptor, one name at a time, never through a link. What is
// under a name of the catalog, or under what the plan held, is judged as
// a whole where it is named, and only searched for credentials below.
func (w *madeWalk) list(f *os.File, rel string, depth int, descend func(sub string) bool) {
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return
	}
	var ents []os.DirEntry
	for {
		batch, err := f.ReadDir(1024)
		ents = append(ents, batch...)
		if w.budget -= len(batch); w.budget < 0 {
			w.limit()
			return
		}
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return
		}
	}
	w.ix.Dirs[rel] = dirMark{Ino: st.Ino, Ctime: st.Ctim.Nano()}
	w.dirty = true
	for c := range w.ix.Creds {
		if path.Dir(c) == rel {
			delete(w.ix.Creds, c) // listed again below
		}
	}
	judging := rel == "." || obey.Match(rel) == nil && !w.underHeld(rel)
	if judging && rel != "." && obey.GitDir(func(p string) bool {
		return slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == path.Base(p) })
	}, ".") {
		// A repository, whatever it is called; what else it holds is
		// looked at as any directory's.
		w.ix.Watch[rel] = true
		w.judge(rel, true)
	}
	for _, e := range ents {
		sub := path.Join(rel, e.Name())
		if c, ok := Match(sub, e.IsDir(), true); ok {
			w.ix.Creds[sub] = Found{Rel: sub, Cred: c, Dir: e.IsDir()}.What()
			continue
		}
		if e.IsDir() && w.homes[filepath.Join(w.real, sub)] {
			w.ix.Creds[sub] = "the home directory " + sub
			continue
		}
		switch {
		case !judging:
		case w.held[sub]:
			// Kept read-only, or a repository whose obeyed files were:
			// what else the run made at the top of a repository is
			// looked at (an interrupted rebase's commands).
			if path.Base(sub) == ".git" && e.IsDir() {
				w.ix.Watch[sub] = true
				w.judge(sub, true)
			}
		case obey.Match(sub) != nil || e.Type()&os.ModeSymlink != 0 && obey.LinkMatch(sub) != nil || e.Type().IsRegular() && isData(e.Name()):
			w.ix.Watch[sub] = true
			w.judge(sub, e.IsDir())
		}
		if !e.IsDir() || !descend(sub) {
			continue
		}
		if depth+1 > MaxMadeDepth {
			w.limit(sub)
			continue
		}
		fd, err := unix.Openat(int(f.Fd()), e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			w.unreadable(sub, err)
			continue
		}
		w.list(os.NewFile(uintptr(fd), sub), sub, depth+1, descend)
	}
}

// underHeld reports whether rel is under a path the plan held.
func (w *madeWalk) underHeld(rel string) bool {
	for p := path.Dir(rel); p != "."; p = path.Dir(p) {
		if w.held[p] {
			return true
		}
	}
	return w.held[rel]
}

// judge reports rel, worth a look (a name of the catalog, a repository by
// its structure, or a file that may be a profile), if the run made or
// changed it.
func (w *madeWalk) judge(rel string, isDir bool) {
	if w.since == math.MaxInt64 || w.seen[rel] {
		return // a look that judges nothing (Sensitive's) only learns the tree
	}
	w.seen[rel] = true
	m := obey.Match(rel)
	if st := w.stat(rel); m == nil && st != nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		m = obey.LinkMatch(rel) // a link standing in for a name of the catalog
	}
	switch {
	case m == nil && isDir:
		// A repository by its structure: making one of a directory is
		// what HEAD, objects, refs or commondir new in it say.
		w.repo(rel, "", append(slices.Clone(obey.GitWatch), obey.GitMarkers...))
	case m == nil:
		if st := w.stat(rel); st != nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Ctim.Nano() >= w.since && st.Size <= obey.MaxContent && w.isProfile(rel) {
			w.add(rel, "cordon")
		}
	case len(m.Watch) > 0 && isDir:
		w.repo(rel, m.Tool, m.Watch)
	case w.changedUnder(rel, 0):
		w.add(rel, m.Tool)
	}
}

// repo reports, for the repository directory rel, the files of watch in
// it that changed (all of it when the run made the directory itself); for
// a git directory (tool "git"), what else the run made at its top, and the
// obeyed files of the repositories it keeps for its submodules and linked
// worktrees. tool "" is a directory git takes as a repository by its
// structure, whatever its name: the rest of it is walked as any
// directory's.
func (w *madeWalk) repo(rel, tool string, watch []string) {
	if tool == "" {
		tool = "git"
	} else if tool == "git" {
		defer w.gitExtras(rel, watch)
	}
	if w.born(rel) {
		w.add(rel, tool)
		return
	}
	for _, n := range watch {
		if sub := path.Join(rel, n); w.changedUnder(sub, 0) {
			w.add(sub, tool)
		}
	}
}

// gitExtras reports what the run made or changed at the top of the git
// directory rel that is neither git's data (obey.GitDataName) nor in watch
// (reported already), and the obeyed files of the repositories under its
// modules and worktrees.
func (w *madeWalk) gitExtras(rel string, watch []string) {
	for _, n := range w.names(rel) {
		sub := path.Join(rel, n)
		switch {
		case n == "objects" || n == "refs" || n == "logs" || n == "rr-cache":
			w.gitData(rel, n, 0)
		case obey.GitDataName(n), slices.Contains(watch, n):
		case n == "modules" || n == "worktrees":
			w.gitRepos(sub, 0)
		case w.changedUnder(sub, 0):
			w.add(sub, "git")
		}
	}
}

// gitData reports, under rel (a directory of data of the git directory
// gitDir, relative to it: objects, refs, logs, rr-cache), what the run
// made or changed there that is no name git gives its data
// (obey.GitDataPath): a repository planted among the references would be
// used through a submodule's entry in the index, which git reads without
// checking it.
func (w *madeWalk) gitData(gitDir, rel string, depth int) {
	if depth > MaxMadeDepth {
		w.limit(path.Join(gitDir, rel))
		return
	}
	for _, e := range w.entries(path.Join(gitDir, rel)) {
		sub := path.Join(rel, e.Name())
		isDir := e.IsDir()
		switch {
		case !obey.GitDataPath(sub, isDir):
			if w.changedUnder(path.Join(gitDir, sub), 0) {
				w.add(path.Join(gitDir, sub), "git")
			}
		case isDir:
			w.gitData(gitDir, sub, depth+1)
		}
	}
}

// gitRepos reports, in the repositories under dir (a git directory's
// modules or worktrees, at any depth), the obeyed files the run changed.
func (w *madeWalk) gitRepos(dir string, depth int) {
	if depth > MaxMadeDepth {
		w.limit(dir)
		return
	}
	for _, n := range w.names(dir) {
		sub := path.Join(dir, n)
		if st := w.stat(sub); st == nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		for _, o := range obey.GitWatch {
			if p := path.Join(sub, o); w.changedUnder(p, 0) {
				w.add(p, "git")
			}
		}
		w.gitRepos(path.Join(sub, "modules"), depth+1)
		if w.stat(path.Join(sub, "HEAD")) == nil {
			w.gitRepos(sub, depth+1) // a submodule's name may hold /
		}
	}
}

// entries lists the directory rel with each entry's type, within the
// walk's budget.
func (w *madeWalk) entries(rel string) []os.DirEntry {
	fd, err := beneath(w.d, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		w.unreadable(rel, err)
		return nil
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	if w.budget -= len(ents); w.budget < 0 {
		w.limit()
		return nil
	}
	return ents
}

// names lists the directory rel, within the walk's budget.
func (w *madeWalk) names(rel string) []string {
	fd, err := beneath(w.d, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			w.unreadable(rel, err)
		}
		return nil
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	if w.budget -= len(names); w.budget < 0 {
		w.limit()
		return nil
	}
	return names
}

// unreadable reports the directory rel, which could not be opened for a
// reason other than its absence, when the run changed it: what it holds
// was not looked at. One closed to cordon's user before the run (another
// user's) is closed to the sandbox's user too, which is no more than it.
func (w *madeWalk) unreadable(rel string, err error) {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || w.seen["unreadable:"+rel] {
		return
	}
	if st := w.stat(rel); st == nil || st.Ctim.Nano() < w.since {
		return
	}
	w.seen["unreadable:"+rel] = true
	w.cut = true
	if len(w.found) < MaxMadeListed {
		w.found = append(w.found, Made{Rel: rel, Unreadable: true})
	}
}

// update looks again at a tree it has an index of: every directory whose
// inode or change time moved is listed again, a directory new to the
// index is walked in full, and every path worth a look is judged.
func (w *madeWalk) update() {
	dirs := make([]string, 0, len(w.ix.Dirs))
	for rel := range w.ix.Dirs {
		dirs = append(dirs, rel)
	}
	// Parents first: a directory walked in full is not listed again.
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	listed := map[string]bool{}
	unknown := func(sub string) bool {
		// Descend only into what the index does not know as it is now.
		mk, ok := w.ix.Dirs[sub]
		st := w.stat(sub)
		return !ok || st == nil || st.Ino != mk.Ino
	}
	for _, rel := range dirs {
		if listed[rel] {
			continue
		}
		mk := w.ix.Dirs[rel]
		st := w.stat(rel)
		if st == nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			w.forget(rel)
			continue
		}
		if st.Ino == mk.Ino && st.Ctim.Nano() == mk.Ctime {
			continue
		}
		fd, err := beneath(w.d, rel, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			w.unreadable(rel, err)
			w.forget(rel)
			continue
		}
		w.list(os.NewFile(uintptr(fd), rel), rel, strings.Count(rel, "/"), func(sub string) bool {
			if !unknown(sub) {
				return false
			}
			listed[sub] = true
			return true
		})
	}
	for rel := range w.ix.Watch {
		st := w.stat(rel)
		if st == nil {
			delete(w.ix.Watch, rel)
			w.dirty = true
			continue
		}
		w.judge(rel, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	}
}

// forget drops the directory rel, gone or changed past knowing, from the
// index, with the credentials it held.
func (w *madeWalk) forget(rel string) {
	delete(w.ix.Dirs, rel)
	w.dirty = true
	for c := range w.ix.Creds {
		if strings.HasPrefix(c, rel+"/") {
			delete(w.ix.Creds, c)
		}
	}
}

// isData reports whether a file's name says it may hold YAML or JSON.
func isData(name string) bool {
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// changedUnder reports whether rel, or anything under it, changed at or
// after since, within the walk's budget.
func (w *madeWalk) changedUnder(rel string, depth int) bool {
	st := w.stat(rel)
	if st == nil {
		return false
	}
	if st.Ctim.Nano() >= w.since {
		return true
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || depth > MaxMadeDepth {
		return false
	}
	fd, err := beneath(w.d, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		w.unreadable(rel, err)
		return false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	for {
		batch, err := f.ReadDir(256)
		if w.budget -= len(batch); w.budget < 0 {
			w.limit()
			return false
		}
		for _, e := range batch {
			if w.changedUnder(path.Join(rel, e.Name()), depth+1) {
				return true
			}
		}
		if err != nil || len(batch) == 0 {
			return false
		}
	}
}

// isProfile reads the file rel (a regular file, beneath the root, no
// links) and says whether it is one cordon obeys by content.
func (w *madeWalk) isProfile(rel string) bool {
	fd, err := beneath(w.d, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(f, obey.MaxContent+1))
	return err == nil && obey.Content(data) != nil
}

// MovedHead is the name MoveRootHead gives a HEAD it moves aside.
const MovedHead = "HEAD.moved-by-cordon"

// MoveRootHead moves aside a HEAD that a run made (at or after since) at
// the root of the tree at root, once the run has ended: with objects and
// refs there, git would take the root itself as a repository, where the
// root has no .git or one whose own HEAD is spoiled (as the run could
// leave it), and obey what the run wrote there. While the run goes on, a
// root without a .git has a placeholder git stops at (rootGitfile); a
// placeholder named HEAD would keep the run from making one, but make
// every git argument naming HEAD ambiguous. It returns the name it was
// moved to, relative to root, or "".
func MoveRootHead(root string, since time.Time) (string, error) {
	d, err := openRoot(root)
	if err != nil {
		return "", err
	}
	defer d.Close()
	w := &madeWalk{d: d, since: since.UnixNano()}
	st := w.stat("HEAD")
	if st == nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "", nil
	}
	var stx unix.Statx_t
	made := st.Ctim.Nano() >= w.since
	if unix.Statx(int(d.Fd()), "HEAD", unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) == nil && stx.Mask&unix.STATX_BTIME != 0 {
		made = w.born("HEAD")
	}
	if !made {
		return "", nil
	}
	for i := 0; i < 100; i++ {
		to := MovedHead
		if i > 0 {
			to = fmt.Sprintf("%s.%d", MovedHead, i)
		}
		err := unix.Renameat2(int(d.Fd()), "HEAD", int(d.Fd()), to, unix.RENAME_NOREPLACE)
		if err == nil {
			return to, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("moving %s aside: %w", show(root, "HEAD"), err)
		}
	}
	return "", fmt.Errorf("moving %s aside: %s and 99 more names are taken", show(root, "HEAD"), MovedHead)
}
