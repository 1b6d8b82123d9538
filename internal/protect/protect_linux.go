package protect

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

type kind int

const (
	kindNone kind = iota
	kindDir
	kindFile
	kindMultiLink // a file with more than one name
	kindLink
)

func openRoot(root string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, root, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	return os.NewFile(uintptr(fd), root), nil
}

// beneath opens rel under d without following links or leaving d.
func beneath(d *os.File, rel string, flags uint64) (int, error) {
	return unix.Openat2(int(d.Fd()), rel, &unix.OpenHow{
		Flags:   flags | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// lstat says what rel under d is; its parent is known to be a directory
// reached without links.
func lstat(d *os.File, rel string) (kind, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(d.Fd()), rel, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return kindNone, nil
	case err != nil:
		return kindNone, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return kindLink, nil
	case unix.S_IFDIR:
		return kindDir, nil
	}
	if st.Nlink > 1 && st.Mode&unix.S_IFMT == unix.S_IFREG {
		return kindMultiLink, nil
	}
	return kindFile, nil
}

// ghost is a placeholder directory cordon made, known by its device, inode
// and change time: an inode number freed and given to a new directory
// elsewhere does not pass for it.
type ghost struct {
	rel      string
	dev, ino uint64
	ctime    int64 // ns
}

func (g ghost) is(st *unix.Stat_t) bool {
	return st.Dev == g.dev && st.Ino == g.ino && st.Ctim.Nano() == g.ctime
}

// mkGhost makes the placeholder rel and returns it open, with a shared lock
// taken at once, so that nothing that removes placeholders takes it away
// while this sandbox needs it.
func mkGhost(d *os.File, rel string) (ghost, *os.File, error) {
	dir, name := path.Split(rel)
	pfd := int(d.Fd())
	if dir != "" {
		fd, err := beneath(d, strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return ghost{}, nil, err
		}
		defer unix.Close(fd)
		pfd = fd
	}
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil {
		return ghost{}, nil, err
	}
	fd, err := unix.Openat2(pfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return ghost{}, nil, err
	}
	unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return ghost{}, nil, err
	}
	return ghost{rel: rel, dev: st.Dev, ino: st.Ino, ctime: st.Ctim.Nano()}, os.NewFile(uintptr(fd), rel), nil
}

// remove takes the placeholder away if it is still the empty directory
// cordon made and no other sandbox holds it (each holds a shared lock on
// what it protects for as long as it runs).
func (g ghost) remove(root string) {
	d, err := openRoot(root)
	if err != nil {
		return
	}
	defer d.Close()
	fd, err := beneath(d, g.rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || !g.is(&st) {
		return
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	dir, name := path.Split(g.rel)
	pfd := int(d.Fd())
	if dir != "" {
		p, err := beneath(d, strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return
		}
		defer unix.Close(p)
		pfd = p
	}
	// rmdir removes only an empty directory: whatever came to be in it
	// stays.
	unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
}

// hold takes a shared lock on every read-only entry, so that another
// sandbox ending does not remove a placeholder this one still protects.
func (p *Plan) hold(d *os.File) error {
	for _, e := range p.Entries {
		if !e.ReadOnly {
			continue
		}
		fd, err := beneath(d, e.Rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
		if err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENXIO) {
				continue // nothing to hold, nothing of cordon's to keep
			}
			return &os.PathError{Op: "open", Path: show(p.Root, e.Rel), Err: err}
		}
		f := os.NewFile(uintptr(fd), e.Rel)
		unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		p.held = append(p.held, f)
	}
	return nil
}

// Bounds of the walk of .git/modules: a workspace cannot make planning its
// protection take long, and one with more submodules than cordon protects
// is refused rather than half protected.
const (
	maxSubmoduleDirs  = 1024
	maxSubmoduleRepos = 128
)

// errSubmodules reports a .git/modules beyond those bounds.
var errSubmodules = fmt.Errorf("more than %d submodule repositories (or %d directories) under .git/modules: cordon cannot protect the hooks and configuration of them all; open .git by name (workspace.unprotect) to run anyway", maxSubmoduleRepos, maxSubmoduleDirs)

// submodules lists the repositories of submodules under dir (relative to
// d), to depth levels.
func submodules(d *os.File, dir string, depth int) ([]string, error) {
	seen := 0
	var out []string
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth == 0 {
			return nil
		}
		fd, err := beneath(d, dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), dir)
		names, _ := f.Readdirnames(maxSubmoduleDirs + 1)
		f.Close()
		for _, n := range names {
			if seen++; seen > maxSubmoduleDirs {
				return errSubmodules
			}
			sub := dir + "/" + n
			if k, _ := lstat(d, sub+"/HEAD"); k == kindFile {
				if out = append(out, sub); len(out) > maxSubmoduleRepos {
					return errSubmodules
				}
			}
			if k, _ := lstat(d, sub); k == kindDir {
				if err := walk(sub+"/modules", depth-1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(dir, depth)
	return out, err
}

// submodulePaths reads the work-tree paths of the submodules .gitmodules
// declares (.gitmodules itself is protected). Paths that leave the work
// tree, or go into .git, are left out: git refuses them too.
func submodulePaths(d *os.File) ([]string, error) {
	var out []string
	for _, v := range configValues(d, ".gitmodules", "submodule", "path") {
		p := path.Clean(v)
		if p == "." || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || p == ".git" || strings.HasPrefix(p, ".git/") {
			continue
		}
		if out = append(out, p); len(out) > maxSubmoduleRepos {
			return nil, errSubmodules
		}
	}
	return out, nil
}

// configValues reads the values of key in every section named section
// ([section] or [section "name"]) of the git configuration file rel under
// d: the plain syntax git writes, no includes, at most 1 MiB.
func configValues(d *os.File, rel, section, key string) []string {
	fd, err := beneath(d, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	var b bytes.Buffer
	b.ReadFrom(&limited{f, 1 << 20})
	var out []string
	in := false
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			name := strings.ToLower(strings.Trim(strings.Fields(line + " ")[0], "[]"))
			in = name == section
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && in && strings.EqualFold(strings.TrimSpace(k), key) {
			out = append(out, strings.Trim(strings.TrimSpace(v), `"`))
		}
	}
	return out
}

// hooksPath reads core.hooksPath from .git/config: a hooks directory inside
// the work tree (as hook managers such as husky set) is protected as
// .git/hooks is. Only the file itself is read, not its includes.
func hooksPath(d *os.File) string {
	values := configValues(d, ".git/config", "core", "hookspath")
	if len(values) == 0 {
		return ""
	}
	hp := values[len(values)-1]
	if hp == "" || path.IsAbs(hp) || strings.HasPrefix(hp, "~") {
		return ""
	}
	return path.Clean(hp)
}

type limited struct {
	f *os.File
	n int64
}

func (l *limited) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("too large")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}

// undo removes rel under root when it is a file (or a link, or anything
// but a directory), reached without links.
func undo(root, rel string) bool {
	d, err := openRoot(root)
	if err != nil {
		return false
	}
	defer d.Close()
	dir, name := path.Split(rel)
	pfd, err := beneath(d, strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	return unix.Unlinkat(pfd, name, 0) == nil
}

// denied reports an error that refuses the caller whoever it is: no
// permission, or a read-only file system.
func denied(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}
