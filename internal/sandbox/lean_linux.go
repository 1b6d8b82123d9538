package sandbox

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// embedded carries the lean sandbox program (see package sandbox/lean),
// and its SHA-256, when cordon was built with it (build.sh); a plain go
// build carries neither.
//
//go:embed leanbin
var embedded embed.FS

// leanFS is where the lean program is read from; tests change it.
var leanFS fs.FS = embedded

const leanName = "leanbin/cordon-sandbox"

// leanHelper is what every sandbox this process starts runs its init
// from, made once: for root, the host's shared copy of the
// lean program (see sharedCopy), else a sealed copy in memory; nil
// without one.
var leanHelper = sync.OnceValues(func() (*os.File, error) {
	if _, err := fs.Stat(leanFS, leanName); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if os.Geteuid() == 0 {
		if sum, err := fs.ReadFile(leanFS, leanName+".sha256"); err == nil {
			if f, err := sharedCopy(hostDir, strings.TrimSpace(string(sum))); err == nil {
				return f, nil
			}
		}
	}
	return sealed("cordon-sandbox", copyLean)
})

// copyLean writes the lean program to dst.
func copyLean(dst *os.File) error {
	src, err := leanFS.Open(leanName)
	if err != nil {
		return fmt.Errorf("opening the sandbox program: %w", err)
	}
	defer src.Close()
	_, err = io.Copy(dst, src)
	return err
}

// hostDir is where a root cordon keeps the lean program for all sandboxes
// of the host; tests change it.
var hostDir = "/run/cordon"

// sharedCopy returns the lean program whose SHA-256 is sum from dir, where
// it is written first if missing: a file host root owns and only root may
// write, in a directory the same holds for. No sandbox user (never host
// root) can then change what init runs (CVE-2019-5736), and every sandbox
// of the host shares its pages, where a copy in memory per cordon process
// costs each sandbox its own.
func sharedCopy(dir, sum string) (*os.File, error) {
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("the sandbox program's digest %q is not a SHA-256", sum)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()
	if !rootOwned(d) {
		return nil, fmt.Errorf("%s is not host root's alone", dir)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dfd, &sfs); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if sfs.Flags&unix.ST_NOEXEC != 0 {
		return nil, fmt.Errorf("%s is on a file system mounted noexec", dir)
	}
	name := "sandbox-" + sum
	want, err := fs.Stat(leanFS, leanName)
	if err != nil {
		return nil, err
	}
	f, err := openShared(dfd, name, want.Size())
	if errors.Is(err, fs.ErrNotExist) {
		if err = writeShared(dfd, name); err == nil {
			f, err = openShared(dfd, name, want.Size())
			pruneShared(d, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
	}
	defer f.Close()
	return highFD(f)
}

// staleShared is the age past which other builds' shared copies are
// removed when a new one is written; a sandbox running from one keeps it
// (unlinked) until it ends, and its cordon writes it again when next run.
const staleShared = 24 * time.Hour

// pruneShared removes the shared copies of other builds not written in the
// last staleShared: each upgrade would otherwise leave one, in memory.
func pruneShared(d *os.File, keep string) {
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		var st unix.Stat_t
		if n == keep || n == keep+".ok" || !strings.HasPrefix(n, "sandbox-") || unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if time.Since(time.Unix(st.Mtim.Unix())) > staleShared {
			unix.Unlinkat(int(d.Fd()), n, 0)
		}
	}
}

// openShared opens the shared copy, if it is a regular file of size bytes
// that only root may write, holding the program's bytes: compared with
// them, unless this cordon or one before it in this boot compared this
// very file already (see vouch_linux.go).
func openShared(dfd int, name string, size int64) (*os.File, error) {
	f, st, err := openRootOnly(dfd, name)
	if err != nil {
		return nil, err
	}
	if st.Size != size {
		f.Close()
		return nil, errNotShared
	}
	if rec := vouchFor(f, &st); !vouched(dfd, name, rec) {
		if err := sameAsLean(f); err != nil {
			f.Close()
			return nil, err
		}
		vouch(dfd, name, rec)
	}
	return f, nil
}

// errNotShared is a file at the shared copy's name that cordon did not
// write.
var errNotShared = errors.New("not the sandbox program cordon wrote")

// openRootOnly opens name in the directory dfd if it is a regular file
// that only root may write. It never waits: a FIFO planted at the name
// does not block the open.
func openRootOnly(dfd int, name string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, err
	}
	f := os.NewFile(uintptr(fd), name)
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !rootOnly(&st) {
		f.Close()
		return nil, st, errNotShared
	}
	return f, st, nil
}

// sameAsLean compares f's bytes with the lean program's.
func sameAsLean(f *os.File) error {
	src, err := leanFS.Open(leanName)
	if err != nil {
		return err
	}
	defer src.Close()
	a, b := make([]byte, 32<<10), make([]byte, 32<<10)
	for off := int64(0); ; {
		n, err := io.ReadFull(src, a)
		if n > 0 {
			if m, _ := f.ReadAt(b[:n], off); m != n || !bytes.Equal(a[:n], b[:n]) {
				return errors.New("not the sandbox program: its bytes differ")
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// writeShared writes the shared copy as an unnamed file, then names it:
// no other cordon ever sees it half-written.
func writeShared(dfd int, name string) error {
	fd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o555)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := copyLean(f); err != nil {
		return err
	}
	if err := f.Chmod(0o555); err != nil {
		return err
	}
	// Named through a read-only descriptor, the writable one closed first:
	// a cordon that runs the copy as soon as it has a name never finds it
	// open for writing (ETXTBSY).
	ro, err := os.Open(fdPath(f))
	if err != nil {
		return err
	}
	defer ro.Close()
	f.Close()
	err = unix.Linkat(unix.AT_FDCWD, fdPath(ro), dfd, name, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.EEXIST) { // another cordon wrote it meanwhile
		return nil
	}
	return err
}

// helperPath is what cordon starts its helpers outside the sandbox from
// (the id-mapping helper): the lean program when cordon
// carries one, else cordon itself.
func helperPath() string {
	if f, err := leanHelper(); err == nil && f != nil {
		return fdPath(f)
	}
	return "/proc/self/exe"
}

// fdPath names an open file for exec.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// LeanHelper reports whether this cordon carries the lean sandbox program,
// and why not if it cannot use it.
func LeanHelper() (bool, error) {
	f, err := leanHelper()
	return f != nil, err
}
