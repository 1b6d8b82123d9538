package sandbox

import (
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

// leanHelper is what every sandbox this process starts runs its init and
// cleanup helper from, made once: for root, the host's shared copy of the
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
//
// Copies live in a directory named after the host's boot (boot-ID, the
// kernel's random boot_id): what is found there was written by root since
// this boot started. A copy from before, on a /run that is a disk or
// shipped in an image, is in another boot's directory: never run, and
// removed when this boot's copy is written.
func sharedCopy(dir, sum string) (*os.File, error) {
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("the sandbox program's digest %q is not a SHA-256", sum)
	}
	boot, err := bootID()
	if err != nil {
		return nil, err
	}
	d, err := rootDir(unix.AT_FDCWD, dir, 0o755)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(d.Fd()), &sfs); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if sfs.Flags&unix.ST_NOEXEC != 0 {
		return nil, fmt.Errorf("%s is on a file system mounted noexec", dir)
	}
	bd, err := rootDir(int(d.Fd()), "boot-"+boot, 0o700)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	defer bd.Close()
	name := "sandbox-" + sum
	want, err := fs.Stat(leanFS, leanName)
	if err != nil {
		return nil, err
	}
	dfd := int(bd.Fd())
	f, err := openShared(dfd, name, want.Size())
	if errors.Is(err, fs.ErrNotExist) {
		if err = writeShared(dfd, name); err == nil {
			f, err = openShared(dfd, name, want.Size())
			pruneShared(bd, name)
			pruneOld(d, "boot-"+boot)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s/boot-%s/%s: %w", dir, boot, name, err)
	}
	defer f.Close()
	return highFD(f)
}

// bootID is the kernel's identifier of this boot, random at each.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if len(id) != 36 || strings.Trim(id, "0123456789abcdef-") != "" {
		return "", fmt.Errorf("the boot id %q is not one", id)
	}
	return id, nil
}

// rootDir opens the directory name under dfd, made with mode if missing,
// if it is host root's and only root may write it; never through a link.
func rootDir(dfd int, name string, mode uint32) (*os.File, error) {
	if err := unix.Mkdirat(dfd, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	if !rootOwned(d) {
		d.Close()
		return nil, fmt.Errorf("%s is not host root's alone", name)
	}
	return d, nil
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
		if n != keep && strings.HasPrefix(n, "sandbox-") {
			removeStale(d, n)
		}
	}
}

// removeStale removes the copy n in d if it was not written in the last
// staleShared.
func removeStale(d *os.File, n string) {
	var st unix.Stat_t
	if unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && time.Since(time.Unix(st.Mtim.Unix())) > staleShared {
		unix.Unlinkat(int(d.Fd()), n, 0)
	}
}

// pruneOld removes, from the top directory d, the directories of other
// boots with the copies in them (none is ever run again), and copies that
// cordon kept there before it kept them per boot, once stale.
func pruneOld(d *os.File, keep string) {
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		if strings.HasPrefix(n, "sandbox-") {
			removeStale(d, n)
			continue
		}
		if n == keep || !strings.HasPrefix(n, "boot-") {
			continue
		}
		fd, err := unix.Openat(int(d.Fd()), n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		old := os.NewFile(uintptr(fd), n)
		inside, _ := old.Readdirnames(-1)
		for _, c := range inside {
			if strings.HasPrefix(c, "sandbox-") {
				unix.Unlinkat(fd, c, 0)
			}
		}
		old.Close()
		unix.Unlinkat(int(d.Fd()), n, unix.AT_REMOVEDIR)
	}
}

// openShared opens the shared copy, if it is a regular file of size bytes
// that only root may write. It never waits: a FIFO planted at the name
// does not block the open.
func openShared(dfd int, name string, size int64) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size || !rootOnly(&st) {
		f.Close()
		return nil, errors.New("not the sandbox program cordon wrote")
	}
	return f, nil
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
// (the cleanup helper, the id-mapping helper): the lean program when cordon
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
