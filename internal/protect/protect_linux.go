package protect

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

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

// parent opens the directory that holds rel under d (d itself for a name
// at the top, as a new descriptor either way), and returns rel's last name.
func parent(d *os.File, rel string) (int, string, error) {
	dir, name := path.Split(rel)
	fd, err := beneath(d, "./"+strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY)
	return fd, name, err
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

// ghost is a placeholder cordon made (an empty directory, or a file with
// content git reads as harmless), known by its device, inode and change
// time: an inode number freed and given to something new elsewhere does not
// pass for it.
type ghost struct {
	rel      string
	dev, ino uint64
	ctime    int64 // ns
	file     bool
	content  string
}

// is reports whether st is the placeholder g: the same file, unchanged
// since it was made, or, for one named just before it was made (no inode
// yet, see Options.Made), one made then (see intended).
func (g ghost) is(st *unix.Stat_t) bool {
	if g.ino == 0 {
		return intended(st.Ctim.Nano(), g.ctime)
	}
	return st.Dev == g.dev && st.Ino == g.ino && st.Ctim.Nano() == g.ctime
}

// intended reports whether a file changed at ctime was made in the moment
// after cordon said, at named, it would make it: no earlier than the
// clock of file times may lag, and soon after.
func intended(ctime, named int64) bool {
	return ctime >= named-int64(time.Second) && ctime <= named+int64(10*time.Second)
}

// mkGhost makes the placeholder rel and returns it open, with a shared lock
// taken at once, so that nothing that removes placeholders takes it away
// while this sandbox needs it.
func mkGhost(d *os.File, rel string, file bool, content string) (ghost, *os.File, error) {
	pfd, name, err := parent(d, rel)
	if err != nil {
		return ghost{}, nil, err
	}
	defer unix.Close(pfd)
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if file {
		how.Flags = unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
		how.Mode = 0o644
	} else if err := unix.Mkdirat(pfd, name, 0o755); err != nil {
		return ghost{}, nil, err
	}
	fd, err := unix.Openat2(pfd, name, how)
	if err != nil {
		return ghost{}, nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if file {
		if _, err := f.WriteString(content); err != nil {
			f.Close()
			unix.Unlinkat(pfd, name, 0)
			return ghost{}, nil, err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return ghost{}, nil, err
	}
	return ghost{rel: rel, dev: st.Dev, ino: st.Ino, ctime: st.Ctim.Nano(), file: file, content: content}, f, nil
}

// remove takes the placeholder away if it is still the empty directory
// cordon made and no other sandbox holds it (each holds a shared lock on
// what it protects for as long as it runs), and reports whether it did.
func (g ghost) remove(root string) bool {
	d, err := openRoot(root)
	if err != nil {
		return false
	}
	defer d.Close()
	flags := uint64(unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK)
	if g.file {
		flags = unix.O_RDONLY | unix.O_NONBLOCK
	}
	fd, err := beneath(d, g.rel, flags)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || !g.is(&st) {
		return false
	}
	if g.file {
		// Still what cordon wrote, and nothing else.
		b := make([]byte, len(g.content)+1)
		if n, _ := unix.Pread(fd, b, 0); st.Mode&unix.S_IFMT != unix.S_IFREG || string(b[:n]) != g.content {
			return false
		}
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false
	}
	pfd, name, err := parent(d, g.rel)
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	if g.file {
		return unix.Unlinkat(pfd, name, 0) == nil
	}
	// rmdir removes only an empty directory: whatever came to be in it
	// stays.
	return unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR) == nil
}

// hold takes a shared lock on every read-only entry, so that another
// sandbox ending does not remove a placeholder this one still protects.
func (p *Plan) hold(d *os.File) error {
	made := map[string]bool{} // placeholders: held since their making
	for _, g := range p.ghosts {
		made[g.rel] = true
	}
	for _, e := range p.Entries {
		if !e.ReadOnly || made[e.Rel] {
			continue
		}
		fd, err := beneath(d, e.Rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
		if err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENXIO) {
				continue // nothing to hold, nothing of cordon's to keep
			}
			return &os.PathError{Op: "open", Path: show(p.Root, e.Rel), Err: err}
		}
		// Another run that holds the path exclusively is removing it (its
		// placeholder, see ghost.remove): held without the lock, it would be
		// removed from under this sandbox's bind, which then goes with it
		// (a mount point in another mount namespace can be removed), and
		// the sandbox could make the path. The plan is made again once the
		// other run is done, as is one for a path removed between the
		// look and the lock.
		if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) || err == nil && !still(d, e.Rel, fd) {
			unix.Close(fd)
			return &os.PathError{Op: "hold", Path: show(p.Root, e.Rel), Err: removing{}}
		}
		p.held = append(p.held, os.NewFile(uintptr(fd), e.Rel))
	}
	return nil
}

// removing reports a path another run holds exclusively, as it does only
// to remove it: Make plans again (it is fs.ErrNotExist to it).
type removing struct{}

func (removing) Error() string {
	return "held exclusively by another process (a run removing its placeholder), or taken away meanwhile"
}

func (removing) Is(target error) bool { return target == fs.ErrNotExist }

// still reports whether fd is still the file at rel under d.
func still(d *os.File, rel string, fd int) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Fstatat(int(d.Fd()), rel, &b, unix.AT_SYMLINK_NOFOLLOW) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// keepModes records the permissions of the bind's root and of every
// directory pinned in place, holding each: the sandbox owns them (the same
// user, or through the idmapped mount) and could open them to other users
// of the host with chmod, from whom what is protected inside them would
// then not be safe (a world-writable .git lets anyone replace its hooks).
func (p *Plan) keepModes(d *os.File) {
	rels := []string{"."}
	for _, e := range p.Entries {
		if !e.ReadOnly {
			rels = append(rels, e.Rel)
		}
	}
	for _, rel := range rels {
		fd, err := beneath(d, rel, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			unix.Close(fd)
			continue
		}
		p.modes = append(p.modes, keptMode{f: os.NewFile(uintptr(fd), rel), rel: rel, mode: st.Mode & 0o7777})
	}
}

// restoreModes sets back what keepModes recorded where the sandbox changed
// it, through the descriptors held (never by name, which the sandbox may
// have changed), and records which.
func (p *Plan) restoreModes() {
	for _, k := range p.modes {
		var st unix.Stat_t
		if unix.Fstat(int(k.f.Fd()), &st) != nil || st.Mode&0o7777 == k.mode {
			continue
		}
		// The descriptor's magic link is the directory itself.
		if unix.Fchmodat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", k.f.Fd()), k.mode, 0) == nil {
			p.Restored = append(p.Restored, show(p.Root, k.rel))
		}
	}
}

// names lists up to max entries of the directory rel under d (none when
// it is not a directory reached without links).
func names(d *os.File, rel string, max int) []string {
	fd, err := beneath(d, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	out, _ := f.Readdirnames(max)
	return out
}

// readlink reads the link rel under d, whose parent is reached without
// links; isLink is false when rel is anything else.
func readlink(d *os.File, rel string) (target string, isLink bool) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(int(d.Fd()), rel, buf)
	if err != nil || n >= len(buf) {
		return "", false
	}
	return string(buf[:n]), true
}

// readSmall reads at most max bytes of the regular file rel under d,
// reached without links; nothing when it is anything else.
func readSmall(d *os.File, rel string, max int64) []byte {
	fd, err := beneath(d, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return b
}

// denied reports an error that refuses the caller whoever it is: no
// permission, or a read-only file system.
func denied(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}
