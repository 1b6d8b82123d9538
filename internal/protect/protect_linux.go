package protect

import (
	"bufio"
	"bytes"
	"errors"
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

// ghost is a placeholder directory cordon made.
type ghost struct {
	rel      string
	dev, ino uint64
}

func mkGhost(d *os.File, rel string) (ghost, error) {
	dir, name := path.Split(rel)
	pfd := int(d.Fd())
	if dir != "" {
		fd, err := beneath(d, strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return ghost{}, err
		}
		defer unix.Close(fd)
		pfd = fd
	}
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil {
		return ghost{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ghost{}, err
	}
	return ghost{rel: rel, dev: st.Dev, ino: st.Ino}, nil
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
	if unix.Fstat(fd, &st) != nil || st.Dev != g.dev || st.Ino != g.ino {
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
			return &os.PathError{Op: "open", Path: path.Join(p.Root, e.Rel), Err: err}
		}
		f := os.NewFile(uintptr(fd), e.Rel)
		unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		p.held = append(p.held, f)
	}
	return nil
}

// submodules lists the repositories of submodules under dir (relative to
// d), to depth levels.
func submodules(d *os.File, dir string, depth int) []string {
	if depth == 0 {
		return nil
	}
	fd, err := beneath(d, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), dir)
	names, _ := f.Readdirnames(256)
	f.Close()
	var out []string
	for _, n := range names {
		sub := dir + "/" + n
		if k, _ := lstat(d, sub+"/HEAD"); k == kindFile {
			out = append(out, sub)
		}
		if k, _ := lstat(d, sub); k == kindDir {
			out = append(out, submodules(d, sub+"/modules", depth-1)...)
		}
	}
	return out
}

// hooksPath reads core.hooksPath from .git/config: a hooks directory inside
// the work tree (as hook managers such as husky set) is protected as
// .git/hooks is. Only the file itself is read, not its includes.
func hooksPath(d *os.File) string {
	fd, err := beneath(d, ".git/config", unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return ""
	}
	f := os.NewFile(uintptr(fd), "config")
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	var b bytes.Buffer
	b.ReadFrom(&limited{f, 1 << 20})
	section, hp := "", ""
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.Trim(strings.Fields(line + " ")[0], "[]"))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && section == "core" && strings.EqualFold(strings.TrimSpace(k), "hookspath") {
			hp = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
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
