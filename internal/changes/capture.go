package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/protect"
)

// Bounds of what a capture reads from a layer, beyond Limits.
const (
	maxDepth   = 256
	maxTarget  = 4096    // a link's text
	maxDeleted = 1 << 20 // host entries listed as deleted under removed directories
	binaryHead = 8000    // bytes looked at for a NUL, as git does
)

// upperDir is the directory of the layer that holds the overlay's upper.
const upperDir = "upper"

// Overlay's marks in an upper layer.
var opaqueXattrs = []string{"user.overlay.opaque", "trusted.overlay.opaque"}

type capturer struct {
	lower   int // the host workspace's root, O_PATH
	blobs   string
	started int64
	lim     Limits
	entries int
	deleted int
	bytes   int64
	out     []Change
	buf     []byte
}

// Capture reads the overlay upper of layer (its "upper" directory, as the
// sandbox left it) against the host's workspace, keeps the new content in
// dir/run/blobs and the change set in dir/run/set.json, and returns the
// set. It is called once no process of the sandbox runs (or, for a live
// sandbox, on a layer that may still change: what was read is what the set
// holds). Any earlier set of the same run is replaced.
func Capture(layer *os.File, workspace, dir, run string, started time.Time, lim Limits) (*Set, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	at := filepath.Join(dir, run)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("change sets: %w", err)
	}
	if err := os.RemoveAll(at); err != nil {
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	if err := os.MkdirAll(filepath.Join(at, blobDir), 0o700); err != nil {
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	upper, err := unix.Openat(int(layer.Fd()), upperDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the layer's upper directory: %w", err)
	}
	defer unix.Close(upper)
	lower, err := openRoot(workspace)
	if err != nil {
		return nil, err
	}
	defer unix.Close(lower)
	c := &capturer{lower: lower, blobs: filepath.Join(at, blobDir), started: started.UnixNano(), lim: lim, buf: make([]byte, 256<<10)}
	ws, err := c.lowerStat(".")
	if err != nil || ws == nil || ws.Type != Dir {
		return nil, fmt.Errorf("workspace %s: not a directory", workspace)
	}
	if err := c.walk(upper, "", true, false, 0); err != nil {
		os.RemoveAll(at)
		return nil, err
	}
	slices.SortStableFunc(c.out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	s := &Set{Run: run, Workspace: filepath.Clean(workspace), Started: started.UTC(), Captured: time.Now().UTC(), Changes: c.out, Bytes: c.bytes}
	if s.Changes == nil {
		s.Changes = []Change{}
	}
	s.Digest = s.digest()
	b, err := json.MarshalIndent(s, "", " ")
	if err == nil {
		err = writeAtomic(at, setFile, b)
	}
	if err != nil {
		os.RemoveAll(at)
		return nil, fmt.Errorf("change set %s: %w", run, err)
	}
	return s, nil
}

// openRoot opens the host directory ws without following a link.
func openRoot(ws string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return -1, fmt.Errorf("workspace %s: %w", ws, err)
	}
	return fd, nil
}

// beneath is how a path of the host's workspace is resolved: never
// through a link, never out of it.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openLower opens rel in the host's workspace (the last component not
// followed either).
func openLower(root int, rel string, flags uint64) (int, error) {
	return unix.Openat2(root, rel, &unix.OpenHow{Flags: flags | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
}

func statOf(st *unix.Stat_t) *Stat {
	return &Stat{Type: typeOf(st.Mode), Mode: st.Mode & 0o7777, Size: st.Size, Ino: st.Ino, Dev: st.Dev,
		MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano()}
}

func typeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return File
	case unix.S_IFDIR:
		return Dir
	case unix.S_IFLNK:
		return Symlink
	}
	return Special
}

// lowerStat is the host path's state, nil when it does not exist (or is
// reached only through a link, which the sandbox's view shows as the link).
func (c *capturer) lowerStat(rel string) (*Stat, error) {
	fd, err := openLower(c.lower, rel, unix.O_PATH)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return statOf(&st), nil
}

func (c *capturer) count() error {
	c.entries++
	if c.lim.MaxEntries > 0 && c.entries > c.lim.MaxEntries {
		return fmt.Errorf("the layer holds more than %d entries", c.lim.MaxEntries)
	}
	return nil
}

func (c *capturer) add(ch Change) {
	if ch.Base != nil && ch.Base.CtimeNS >= c.started {
		ch.Flags = append(ch.Flags, FlagConflict)
	}
	if Protected(ch.Path) {
		ch.Flags = append(ch.Flags, FlagProtected)
	}
	c.out = append(c.out, ch)
}

// walk compares the upper directory fd (at rel) with the host's: lowerDir
// says the host has a directory there; hidden that the host's entries
// there are not part of the sandbox's view (an opaque directory, or one
// that replaced something else), so any the upper lacks were deleted.
func (c *capturer) walk(fd int, rel string, lowerDir, hidden bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: the layer nests deeper than %d directories", rel, maxDepth)
	}
	names, err := readNames(fd)
	if err != nil {
		return fmt.Errorf("reading the layer at %q: %w", rel, err)
	}
	in := map[string]bool{}
	for _, name := range names {
		in[name] = true
		if err := c.count(); err != nil {
			return err
		}
		if err := c.entry(fd, rel, name, lowerDir, hidden, depth); err != nil {
			return err
		}
	}
	if lowerDir && hidden {
		// Everything of the host's here that the sandbox's view lacks.
		lnames, err := c.lowerNames(relOr(rel))
		if err != nil {
			return err
		}
		for _, name := range lnames {
			if !in[name] {
				if err := c.deleteTree(path.Join(rel, name)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func relOr(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// entry compares one name of the upper directory fd with the host's.
func (c *capturer) entry(fd int, rel, name string, lowerDir, hidden bool, depth int) error {
	p := path.Join(rel, name)
	if len(name) > 255 || len(p) > 4096 {
		return fmt.Errorf("the layer holds a name longer than the host allows")
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	var old *Stat
	if lowerDir {
		var err error
		if old, err = c.lowerStat(p); err != nil {
			return err
		}
	}
	typ := typeOf(st.Mode)
	if typ == Special && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
		// A whiteout: deleted, if the host has it.
		if old != nil {
			return c.deleteTree(p)
		}
		return nil
	}
	if old != nil && old.Type != typ {
		// Another type: the old goes (its subtree too), the new comes.
		if err := c.deleteTree(p); err != nil {
			return err
		}
		old = nil
	}
	switch typ {
	case Dir:
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		defer unix.Close(sub)
		opaque := isOpaque(sub)
		mode := st.Mode & 0o7777
		switch {
		case old == nil:
			c.add(Change{Path: p, Kind: Added, Type: Dir, Mode: mode})
		case old.Mode != mode:
			c.add(Change{Path: p, Kind: Modified, Type: Dir, Mode: mode, OldType: Dir, OldMode: old.Mode, Base: old})
		}
		return c.walk(sub, p, old != nil, hidden || opaque || old == nil, depth+1)
	case Symlink:
		target, err := readlink(fd, name)
		if err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		ch := Change{Path: p, Kind: Added, Type: Symlink, Target: target}
		if old != nil {
			oldTarget, err := c.lowerLink(p)
			if err != nil {
				return err
			}
			if oldTarget == target {
				return nil
			}
			ch.Kind, ch.OldType, ch.OldTarget, ch.Base = Modified, Symlink, oldTarget, old
		}
		if outside(p, target) {
			ch.Flags = append(ch.Flags, FlagOutsideLink)
		}
		c.add(ch)
	case File:
		return c.file(fd, name, p, &st, old)
	default:
		c.add(Change{Path: p, Kind: Added, Type: Special, Mode: st.Mode & 0o7777, Flags: []string{FlagSpecial}})
	}
	return nil
}

// file keeps a regular file of the upper that differs from the host's.
func (c *capturer) file(dirfd int, name, p string, st *unix.Stat_t, old *Stat) error {
	f, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		// The sandbox's own file, made unreadable (chmod 000): the layer
		// is cordon's now.
		if unix.Fchmodat(dirfd, name, st.Mode&0o7777|0o400, 0) == nil {
			f, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	src := os.NewFile(uintptr(f), p)
	defer src.Close()
	var now unix.Stat_t
	if err := unix.Fstat(f, &now); err != nil || now.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%q: changed while it was read", p)
	}
	mode := st.Mode & 0o7777
	sum, size, head, tmp, err := c.keep(src)
	if err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	ch := Change{Path: p, Kind: Added, Type: File, Mode: mode, Size: size, SHA256: sum}
	if old != nil {
		oldSum, err := c.lowerSum(p, old)
		if err != nil {
			return err
		}
		if oldSum == sum && old.Mode == mode {
			os.Remove(tmp)
			return nil // copied up, not changed
		}
		ch.Kind, ch.OldType, ch.OldMode, ch.OldSize, ch.Base = Modified, File, old.Mode, old.Size, old
		ch.Flags = append(ch.Flags, modeFlags(mode, old.Mode, false)...)
		ch.OldSHA256 = oldSum
	} else {
		ch.Flags = append(ch.Flags, modeFlags(mode, 0, true)...)
	}
	if size > LargeFile {
		ch.Flags = append(ch.Flags, FlagLarge)
	}
	if binary(head) {
		ch.Flags = append(ch.Flags, FlagBinary)
	}
	if err := os.Rename(tmp, filepath.Join(c.blobs, sum)); err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	c.bytes += size
	c.add(ch)
	return nil
}

// keep copies src into a temporary blob, hashing it, within the bytes
// left; it returns the digest, size, the first bytes and the blob's name.
func (c *capturer) keep(src io.Reader) (sum string, size int64, head []byte, tmp string, err error) {
	out, err := os.CreateTemp(c.blobs, ".new-")
	if err != nil {
		return "", 0, nil, "", err
	}
	defer out.Close()
	left := int64(-1)
	if c.lim.MaxBytes > 0 {
		left = c.lim.MaxBytes - c.bytes
	}
	h := sha256.New()
	for {
		n, rerr := src.Read(c.buf)
		if n > 0 {
			if len(head) < binaryHead {
				head = append(head, c.buf[:min(n, binaryHead-len(head))]...)
			}
			size += int64(n)
			if left >= 0 && size > left {
				os.Remove(out.Name())
				return "", 0, nil, "", fmt.Errorf("the layer holds more than %d bytes", c.lim.MaxBytes)
			}
			h.Write(c.buf[:n])
			if _, err := out.Write(c.buf[:n]); err != nil {
				os.Remove(out.Name())
				return "", 0, nil, "", err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			os.Remove(out.Name())
			return "", 0, nil, "", rerr
		}
	}
	return hex.EncodeToString(h.Sum(nil)), size, head, out.Name(), nil
}

// lowerSum is the SHA-256 of the host's file at rel.
func (c *capturer) lowerSum(rel string, old *Stat) (string, error) {
	fd, err := openLower(c.lower, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return "", fmt.Errorf("reading the host's %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return hashOf(f, sha256.New(), c.buf)
}

func hashOf(r io.Reader, h hash.Hash, buf []byte) (string, error) {
	if _, err := io.CopyBuffer(h, r, buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c *capturer) lowerLink(rel string) (string, error) {
	dir, name := path.Split(rel)
	fd, err := openLower(c.lower, relOr(strings.TrimSuffix(dir, "/")), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", fmt.Errorf("the host's %s: %w", rel, err)
	}
	defer unix.Close(fd)
	return readlink(fd, name)
}

// lowerNames lists a host directory of the workspace.
func (c *capturer) lowerNames(rel string) ([]string, error) {
	fd, err := openLower(c.lower, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("reading the host's %s: %w", rel, err)
	}
	defer unix.Close(fd)
	return readNames(fd)
}

// deleteTree lists the host's rel, and everything beneath it, as deleted.
func (c *capturer) deleteTree(rel string) error {
	old, err := c.lowerStat(rel)
	if err != nil || old == nil {
		return err
	}
	c.deleted++
	if c.deleted > maxDeleted {
		return fmt.Errorf("more than %d of the host's entries deleted", maxDeleted)
	}
	ch := Change{Path: rel, Kind: Deleted, Type: old.Type, OldType: old.Type, OldMode: old.Mode, OldSize: old.Size, Base: old}
	if old.Type == Symlink {
		if ch.OldTarget, err = c.lowerLink(rel); err != nil {
			return err
		}
	}
	if old.Type == File {
		if ch.OldSize > LargeFile {
			ch.Flags = append(ch.Flags, FlagLarge)
		}
	}
	c.add(ch)
	if old.Type != Dir {
		return nil
	}
	names, err := c.lowerNames(rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := c.deleteTree(path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

// readNames lists a directory, sorted.
func readNames(fd int) ([]string, error) {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func readlink(dirfd int, name string) (string, error) {
	buf := make([]byte, maxTarget+1)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	if n > maxTarget {
		return "", fmt.Errorf("a link's text is longer than %d bytes", maxTarget)
	}
	return string(buf[:n]), nil
}

func isOpaque(fd int) bool {
	buf := make([]byte, 8)
	for _, name := range opaqueXattrs {
		if n, err := unix.Fgetxattr(fd, name, buf); err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// modeFlags flags a mode that makes a file executable, or setuid.
func modeFlags(mode, old uint32, isNew bool) []string {
	var out []string
	if mode&0o111 != 0 && (isNew || old&0o111 == 0) {
		out = append(out, FlagExecutable)
	}
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		out = append(out, FlagSetuid)
	}
	return out
}

// binary reports content that is not text: a NUL, or not UTF-8.
func binary(head []byte) bool {
	if slices.Contains(head, 0) {
		return true
	}
	// A rune cut at the end of the head is not a fault.
	for i := 0; i < 3 && len(head) > 0 && !utf8.Valid(head); i++ {
		head = head[:len(head)-1]
	}
	return !utf8.Valid(head)
}

// outside reports whether the link at p with text target points out of the
// workspace: absolute, or climbing above its root.
func outside(p, target string) bool {
	if strings.HasPrefix(target, "/") {
		return true
	}
	joined := path.Join(path.Dir(p), target)
	return joined == ".." || strings.HasPrefix(joined, "../")
}

// Protected reports whether rel, a path relative to a workspace's root, is
// one the host's tools run or obey (see package protect): a protected
// name at any depth, a start-up file, or a CI workflow.
func Protected(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, part := range parts {
		if slices.Contains(protect.Defaults, part) {
			return true
		}
	}
	if slices.Contains(protect.IfPresent, parts[len(parts)-1]) || slices.Contains(protect.IfPresent, parts[0]) {
		return true
	}
	return rel == ".github/workflows" || strings.HasPrefix(rel, ".github/workflows/")
}
