package changes

import (
	"bytes"
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
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/obey"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// Capture records the changes in an ended sandbox's upper layer as the
// change set of run: layer is the directory holding the overlay's upper/
// (its work/ is ignored), workspace the host workspace (the overlay's lower
// layer, an absolute path), dir cordon's STATE/changes, started when the
// run started. The set goes to dir/RUN/, each new file's content to
// dir/RUN/blobs/SHA256, set.json last; an empty set is written too. A set
// already captured for run is an error; an incomplete one is replaced.
// Capture fails, leaving no set, when the layer holds more than lim allows
// or a name, path, link or depth beyond what Linux itself allows.
func Capture(layer *os.File, workspace, dir, run string, started time.Time, lim Limits) (*Set, error) {
	rd, err := runDir(dir, run)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(workspace) {
		return nil, fmt.Errorf("capture %s: workspace %q is not an absolute path", run, workspace)
	}
	if _, err := os.Lstat(filepath.Join(rd, setFile)); err == nil {
		return nil, fmt.Errorf("capture %s: a change set of this run exists", run)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("capture %s: %w", run, err)
	}
	if err := os.RemoveAll(rd); err != nil { // an incomplete capture
		return nil, fmt.Errorf("capture %s: %w", run, err)
	}
	if err := os.MkdirAll(filepath.Join(rd, blobDir), 0o700); err != nil {
		return nil, fmt.Errorf("capture %s: %w", run, err)
	}
	s, err := capture(layer, workspace, rd, run, started, lim.withDefaults())
	if err != nil {
		os.RemoveAll(rd)
		return nil, fmt.Errorf("capture %s: %w", run, err)
	}
	return s, nil
}

func capture(layer *os.File, workspace, rd, run string, started time.Time, lim Limits) (*Set, error) {
	upper, err := openBeneath(layer, "upper", unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		return nil, fmt.Errorf("upper layer: %w", err)
	}
	defer upper.Close()
	host, err := openRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	defer host.Close()
	blobs, err := os.Open(filepath.Join(rd, blobDir))
	if err != nil {
		return nil, err
	}
	defer blobs.Close()
	c := &capturer{lim: lim, blobs: blobs, started: started.UnixNano(), begun: time.Now().UnixNano(), buf: make([]byte, 128<<10), still: map[string]Landed{}, ufile: map[string]fileID{}, sameIndex: map[string]bool{}}
	if lim.Link {
		c.upper, c.unmade = map[string]upperEntry{}, map[string]bool{}
	}
	if os.Geteuid() != 0 {
		// Without privilege, what the sandbox made unreadable to its
		// owner (chmod 000) is unreadable here too: the layer is the
		// sandbox user's, and so cordon's, to open up.
		budget := lim.MaxEntries
		if budget <= 0 {
			budget = DefaultMaxEntries
		}
		c.modes = map[uint64]uint32{}
		g, err := openBeneath(layer, "upper", unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
		if err != nil {
			return nil, fmt.Errorf("upper layer: %w", err)
		}
		err = grant(g, 0, &budget, c.modes)
		g.Close()
		if err != nil {
			return nil, err
		}
	}
	// What git obeys, as the host's tree and the layer configure it (a
	// hooks directory core.hooksPath names, a repository a .git file
	// names), is flagged as the names protect knows are.
	for _, d := range []*os.File{host, upper} {
		repos, beyond := protect.Repos(d, workspace)
		c.repos, c.beyond = append(c.repos, repos...), append(c.beyond, beyond)
	}
	if err := c.dir(upper, host, "", 0, opaque(upper)); err != nil {
		return nil, err
	}
	c.flagObeyed(upper, host, pendingPaths(filepath.Dir(rd), workspace, run))
	s := &Set{Run: run, Workspace: workspace, Started: started, Captured: time.Now(), Changes: c.changes, Bytes: c.bytes, upper: c.upper, unmade: c.unmade, still: c.still, ufile: c.ufile}
	if s.Changes == nil {
		s.Changes = []Change{}
	}
	sortChanges(s.Changes)
	s.Digest = digest(s)
	// The blobs are on disk before the set that names them. Linked from
	// a guarded workspace's layer, they are what the sandbox wrote, which
	// lands at once, as unsynced as a direct workspace's writes would be:
	// a set that waits is checked against its digest when applied.
	if !lim.Link {
		if err := unix.Syncfs(int(blobs.Fd())); err != nil {
			return nil, fmt.Errorf("sync: %w", err)
		}
	}
	data, err := json.MarshalIndent(setJSON{s.Run, bstr(s.Workspace), s.Started, s.Captured, s.Changes, s.Bytes, s.Digest}, "", "\t")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(rd, setFile, data); err != nil {
		return nil, err
	}
	return s, nil
}

// writeAtomic writes data to dir/name through a temporary file, synced and
// renamed into place.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// capturer walks an upper layer against the host tree.
type capturer struct {
	lim     Limits
	blobs   *os.File
	started int64
	begun   int64 // when the capture began
	buf     []byte

	changes []Change
	entries int   // upper entries seen
	deleted int   // host paths listed as deleted
	read    int64 // bytes of new content read
	bytes   int64 // new content, in total
	// modes are the modes of upper entries before grant opened them up,
	// by inode.
	modes map[uint64]uint32
	meta  int64 // bytes of paths and link texts recorded
	// repos are the repositories git uses as the trees configure them
	// (protect.Repos), beyond report the paths outside them git obeys.
	repos  []string
	beyond []func(string) bool
	// obeysBytes are the bytes of the changes' Obeys, in all.
	obeysBytes int
	// small holds the content of the last file hashed, when it is no
	// larger than obey.MaxContent (smallSum is its hash): what Content
	// judges, without reading it again.
	small    []byte
	smallSum string
	// upper records the added paths of the upper layer (Limits.Link).
	upper map[string]upperEntry
	// unmade lists the added files whose blob is made later (see kept).
	unmade map[string]bool
	// still are the landings of lim.Landed still true of the host, and
	// ufile identifies each file of the upper layer.
	still map[string]Landed
	ufile map[string]fileID
	// sameIndex are the git indexes the host changed since they landed
	// that still hold the entries they landed with.
	sameIndex map[string]bool
}

// rereadNames are the names of files the judgment of a set reads from
// their blobs (a git directory's HEAD and configuration).
var rereadNames = map[string]bool{"HEAD": true, "config": true, "config.worktree": true, "commondir": true, "gitdir": true}

// opaque reports whether the upper directory d hides the lower one.
func opaque(d *os.File) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"user.overlay.opaque", "trusted.overlay.opaque"} {
		if n, err := unix.Fgetxattr(int(d.Fd()), name, buf); err == nil && string(buf[:n]) == "y" {
			return true
		}
	}
	return false
}

// names reads the names in d, counting each against the entry limit.
func (c *capturer) names(d *os.File) ([]string, error) {
	var out []string
	for {
		batch, err := d.Readdirnames(512)
		for _, n := range batch {
			if c.entries++; c.entries > c.lim.MaxEntries {
				return nil, fmt.Errorf("more than %d entries in the upper layer", c.lim.MaxEntries)
			}
			out = append(out, n)
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// join makes the path of name in the directory rel, checking its bounds.
func join(rel, name string) (string, error) {
	p := name
	if rel != "" {
		p = rel + "/" + name
	}
	if len(name) > maxName || len(p) > maxPath || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("invalid or too long name %q in %q", name, rel)
	}
	return p, nil
}

// dir compares the upper directory up with the host directory host (nil
// when the host has none there) at rel; under an opaque directory the
// host's entries the upper lacks are deleted.
func (c *capturer) dir(up, host *os.File, rel string, depth int, opq bool) error {
	if depth > maxDepth {
		return fmt.Errorf("%q: deeper than %d directories", rel, maxDepth)
	}
	names, err := c.names(up)
	if err != nil {
		return fmt.Errorf("%q: %w", rel, err)
	}
	for _, name := range names {
		p, err := join(rel, name)
		if err != nil {
			return err
		}
		if err := c.entry(up, host, name, p, depth, opq); err != nil {
			return err
		}
	}
	if !opq || host == nil {
		return nil
	}
	hostNames, err := c.hostNames(host, rel)
	if err != nil {
		return err
	}
	inUpper := make(map[string]bool, len(names))
	for _, n := range names {
		inUpper[n] = true
	}
	for _, name := range hostNames {
		if inUpper[name] {
			continue
		}
		p, err := join(rel, name)
		if err != nil {
			return err
		}
		if err := c.deleteAt(host, name, p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// hostNames reads the names in the host directory d, sorted.
func (c *capturer) hostNames(d *os.File, rel string) ([]string, error) {
	var out []string
	for {
		batch, err := d.Readdirnames(512)
		out = append(out, batch...)
		if len(out)+c.deleted > maxDeleted {
			return nil, fmt.Errorf("%q: more than %d host paths to list", rel, maxDeleted)
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			slices.Sort(out)
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%q: %w", rel, err)
		}
	}
}

// entry compares the upper's name in up (at rel p) with the host's.
func (c *capturer) entry(up, host *os.File, name, p string, depth int, opq bool) error {
	u, err := lstatAt(up, name)
	if err != nil || u == nil {
		return fmt.Errorf("%q: upper layer: %v", p, err)
	}
	if m, ok := c.modes[u.Ino]; ok {
		u.Mode = u.Mode&^0o7777 | m
	}
	var h *unix.Stat_t
	if host != nil {
		if h, err = lstatAt(host, name); err != nil {
			return fmt.Errorf("%q: workspace: %w", p, err)
		}
	}
	if h != nil {
		c.noteLanded(p, h)
	}
	if c.lim.Landed != nil {
		c.ufile[p] = fileID{u.Ino, u.Ctim.Nano(), c.racy(u.Ctim.Nano())}
	}
	// Unchanged in the layer since it was noted: what the host did since
	// is the host's. A directory's own change only: what is under it is
	// looked at still (but not what the host added to it since).
	staleDir := false
	if c.stale(up, name, p, u) {
		if typeOf(u.Mode) != TypeDir {
			return nil
		}
		staleDir = true
	}
	if whiteout(u) {
		if h == nil {
			return nil
		}
		return c.deleteAt(host, name, p, depth+1)
	}
	ut := typeOf(u.Mode)
	ch := Change{Path: p, Kind: Added, Type: ut, Mode: u.Mode & 07777}
	sameType := h != nil && typeOf(h.Mode) == ut && (ut != TypeSpecial || h.Mode&unix.S_IFMT == u.Mode&unix.S_IFMT)
	if staleDir && !sameType {
		h = nil // the host's, whatever it is
	}
	if h != nil && !sameType {
		// The old goes, with everything under it; the new is added.
		if err := c.deleteAt(host, name, p, depth+1); err != nil {
			return err
		}
		h = nil
	}
	if h != nil {
		ch.Kind, ch.OldType, ch.OldMode, ch.Base = Modified, typeOf(h.Mode), h.Mode&07777, statOf(h)
	}
	if c.upper != nil && h == nil {
		_, granted := c.modes[u.Ino]
		c.upper[p] = upperEntry{ino: u.Ino, ctime: u.Ctim.Nano(), uid: u.Uid, gid: u.Gid, plain: !granted && (ut == TypeDir || ut == TypeSymlink)}
	}
	switch ut {
	case TypeDir:
		sub, err := openDirAt(up, name)
		if err != nil {
			return fmt.Errorf("%q: upper layer: %w", p, err)
		}
		defer sub.Close()
		if e, ok := c.upper[p]; ok && h == nil && !plainInode(sub) {
			e.plain = false
			c.upper[p] = e
		}
		var hsub *os.File
		if h != nil {
			if hsub, err = openDirAt(host, name); err != nil {
				return fmt.Errorf("%q: workspace: %w", p, err)
			}
			defer hsub.Close()
		}
		if (h == nil || ch.Mode != ch.OldMode) && !staleDir {
			if err := c.add(ch, false); err != nil {
				return err
			}
		}
		return c.dir(sub, hsub, p, depth+1, !staleDir && (opq || opaque(sub)))
	case TypeSymlink:
		if ch.Target, err = readlinkAt(up, name); err != nil {
			return fmt.Errorf("%q: upper layer: %w", p, err)
		}
		if h != nil {
			if ch.OldTarget, err = readlinkAt(host, name); err != nil {
				return fmt.Errorf("%q: workspace: %w", p, err)
			}
			if ch.OldTarget == ch.Target {
				return nil
			}
		}
		ch.Mode = 0o777
		return c.add(ch, false)
	case TypeFile:
		return c.file(up, host, name, ch, u, h)
	}
	if h != nil && h.Mode == u.Mode && h.Rdev == u.Rdev {
		return nil
	}
	return c.add(ch, false)
}

// file records the regular file name of up, ch, against the host's h.
func (c *capturer) file(up, host *os.File, name string, ch Change, u, h *unix.Stat_t) error {
	if h != nil {
		var err error
		// A git index compared by its entries is read once: what is
		// hashed is what is compared.
		var index *bytes.Buffer
		var into io.Writer
		if c.indexWanted(ch.Path, h) {
			index = &bytes.Buffer{}
			into = index
		}
		ch.OldSize, ch.OldSHA256, _, err = c.hashAt(host, name, into, h.Size)
		switch {
		case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
			// The host's file is closed to cordon: its content cannot be
			// judged, and what would replace it waits, as a conflict.
			ch.OldSize, ch.OldSHA256 = h.Size, ""
			ch.Flags = append(ch.Flags, FlagConflict)
		case err != nil:
			return fmt.Errorf("%q: workspace: %w", ch.Path, err)
		}
		if index != nil && err == nil {
			c.checkIndex(ch.Path, index.Bytes())
		}
		if u.Size == h.Size {
			_, sum, _, err := c.hashAt(up, name, nil, u.Size)
			if err != nil {
				return fmt.Errorf("%q: upper layer: %w", ch.Path, err)
			}
			if sum == ch.OldSHA256 {
				if ch.Mode == ch.OldMode {
					c.sameAsHost(ch.Path, u, h, sum)
					return nil // touched, or copied up unchanged
				}
				// The mode alone changed: the content is the host's.
				ch.Size, ch.SHA256 = ch.OldSize, ch.OldSHA256
				return c.add(ch, false)
			}
		}
	}
	// An added file's blob may wait until it is needed, unless the
	// judgment reads it again (what a git directory holds by these names).
	later := c.upper != nil && h == nil && !rereadNames[name]
	b, err := c.blob(up, name, u.Size, later)
	if err != nil {
		return fmt.Errorf("%q: %w", ch.Path, err)
	}
	ch.Size, ch.SHA256 = b.size, b.sum
	if b.later {
		c.unmade[ch.Path] = true
	}
	if e, ok := c.upper[ch.Path]; ok && h == nil {
		e.plain = b.plain && u.Mode&0o7777 == ch.Mode
		c.upper[ch.Path] = e
	}
	c.bytes += ch.Size
	if ch.Size <= obey.MaxContent && c.cordonFile(ch.SHA256) {
		// A profile or an approval record, whatever its name, and whatever
		// bytes its comments hold: what cordon itself would obey.
		ch.Flags = []string{FlagProtected}
	}
	return c.add(ch, b.binary)
}

// kept is a new file's content as blob kept it.
type kept struct {
	size   int64
	sum    string
	binary bool
	// plain: the blob is the layer's very file, a plain one (upperEntry),
	// linked, or to be linked when needed (later).
	plain, later bool
}

// cordonFile reports whether the new content sum (a blob) is a file
// cordon obeys by its content (obey.Content).
func (c *capturer) cordonFile(sum string) bool {
	if c.smallSum == sum {
		return obey.Content(c.small) != nil
	}
	data, err := readFile(filepath.Join(c.blobs.Name(), sum), obey.MaxContent)
	return err != nil || obey.Content(data) != nil // unread: held
}

// hashAt reads the regular file name in d through w (when not nil), size
// bytes as its lstat said: no more is read, and a file of another length
// by then (a live layer may grow one, or make it sparse and huge) is an
// error, not a read without end.
func (c *capturer) hashAt(d *os.File, name string, w io.Writer, size int64) (int64, string, bool, error) {
	if swapHook != nil {
		swapHook(d, name)
	}
	f, _, err := openFileAt(d, name)
	if err != nil {
		return 0, "", false, err
	}
	defer f.Close()
	return c.hash(f, w, size)
}

// hash reads the open file f through w (when not nil), size bytes and no
// more (see hashAt), keeping it in small when it is small enough: its
// length, SHA-256 (hex) and whether it is binary.
func (c *capturer) hash(f *os.File, w io.Writer, size int64) (int64, string, bool, error) {
	h := sha256.New()
	sn := &sniffer{}
	ws := []io.Writer{h, sn}
	if w != nil {
		ws = append(ws, w)
	}
	keep := size <= obey.MaxContent
	if keep {
		ws = append(ws, c.smallWriter())
	}
	n, err := io.CopyBuffer(io.MultiWriter(ws...), io.LimitReader(f, size+1), c.buf)
	if err != nil {
		return 0, "", false, err
	}
	if n != size {
		return 0, "", false, fmt.Errorf("it changed while it was read (%d bytes, then more or fewer)", size)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if keep {
		c.smallSum = sum
	}
	return n, sum, sn.binary(), nil
}

// smallWriter empties small and returns a writer that fills it (see
// capturer.small).
func (c *capturer) smallWriter() io.Writer {
	c.small, c.smallSum = c.small[:0], ""
	return (*smallBuf)(c)
}

// smallBuf appends to its capturer's small.
type smallBuf capturer

func (b *smallBuf) Write(p []byte) (int, error) {
	b.small = append(b.small, p...)
	return len(p), nil
}

// blob copies the upper's file name in up, of size bytes, into the blobs,
// once per content (a second copy of a content replaces the first).
// With Limits.Link, it is linked instead where it can be (linkBlob).
func (c *capturer) blob(up *os.File, name string, size int64, later bool) (kept, error) {
	if c.read+size > c.lim.MaxBytes {
		return kept{}, fmt.Errorf("more than %d bytes of new content", c.lim.MaxBytes)
	}
	if c.lim.Link {
		if b, ok, err := c.linkBlob(up, name, size, later); ok || err != nil {
			return b, err
		}
	}
	tmp, err := os.CreateTemp(c.blobs.Name(), ".tmp-*")
	if err != nil {
		return kept{}, err
	}
	defer tmp.Close()
	n, sum, binary, err := c.hashAt(up, name, tmp, size)
	if err == nil {
		c.read += n
		err = os.Rename(tmp.Name(), filepath.Join(c.blobs.Name(), sum))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return kept{}, err
	}
	return kept{size: n, sum: sum, binary: binary}, nil
}

// linkBlob keeps the upper's file name in up, of size bytes, as a blob by
// linking the very file it read (not the name, which could name another
// by then) into the blobs: ok is false, and nothing was kept, where that
// cannot be done or should not be (another file system; a file its owner
// cannot read, with set-id bits, or linked elsewhere in the layer, all of
// which a copy of its content leaves behind).
//
// With later, a plain file (see upperEntry) is only read: its blob is
// made when it is known to be needed (Land: linked from the layer).
func (c *capturer) linkBlob(up *os.File, name string, size int64, later bool) (b kept, ok bool, err error) {
	f, st, err := openFileAt(up, name)
	if err != nil {
		return kept{}, false, nil // the copy says why
	}
	defer f.Close()
	if st.Nlink != 1 || st.Mode&0o400 == 0 || st.Mode&0o6000 != 0 || st.Size != size {
		return kept{}, false, nil
	}
	if b.size, b.sum, b.binary, err = c.hash(f, nil, size); err != nil {
		return kept{}, false, err
	}
	b.plain = plainInode(f)
	if b.later = later && b.plain; !b.later {
		if err := linkFile(f, c.blobs, b.sum); err != nil && !errors.Is(err, unix.EEXIST) { // EEXIST: the same content, kept before
			return kept{}, false, nil
		}
	}
	c.read += b.size
	return b, true, nil
}

// deleteAt lists the host's name in d (at rel p) as deleted, and everything
// under it if it is a directory.
func (c *capturer) deleteAt(d *os.File, name, p string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%q: deeper than %d directories", p, maxDepth)
	}
	if c.deleted++; c.deleted > maxDeleted {
		return fmt.Errorf("more than %d host paths deleted", maxDeleted)
	}
	h, err := lstatAt(d, name)
	if err != nil {
		return fmt.Errorf("%q: workspace: %w", p, err)
	}
	if h == nil {
		return nil
	}
	ch := Change{Path: p, Kind: Deleted, Type: typeOf(h.Mode), Mode: h.Mode & 07777, Base: statOf(h)}
	ch.OldType, ch.OldMode = ch.Type, ch.Mode
	switch ch.Type {
	case TypeFile:
		if ch.OldSize, ch.OldSHA256, _, err = c.hashAt(d, name, nil, h.Size); err != nil {
			return fmt.Errorf("%q: workspace: %w", p, err)
		}
	case TypeSymlink:
		if ch.OldTarget, err = readlinkAt(d, name); err != nil {
			return fmt.Errorf("%q: workspace: %w", p, err)
		}
	case TypeDir:
		sub, err := openDirAt(d, name)
		if err != nil {
			return fmt.Errorf("%q: workspace: %w", p, err)
		}
		defer sub.Close()
		names, err := c.hostNames(sub, p)
		if err != nil {
			return err
		}
		for _, n := range names {
			sp, err := join(p, n)
			if err != nil {
				return err
			}
			if err := c.deleteAt(sub, n, sp, depth+1); err != nil {
				return err
			}
		}
	}
	return c.add(ch, false)
}

// add records ch with its flags; past maxMeta bytes of paths and link
// texts in all, it refuses.
func (c *capturer) add(ch Change, binary bool) error {
	if c.meta += int64(len(ch.Path) + len(ch.Target) + len(ch.OldTarget)); c.meta > maxMeta {
		return fmt.Errorf("more than %d bytes of paths and link texts in the changes", maxMeta)
	}
	fl := ch.Flags // FlagProtected, when the content said so; flagObeyed adds it by path
	if ch.Kind != Deleted {
		if ch.Type == TypeFile && ch.Mode&0o111 != 0 && (ch.OldType != TypeFile || ch.OldMode&0o111 == 0) {
			fl = append(fl, FlagExecutable)
		}
		if ch.Mode&0o6000 != 0 && ch.Type != TypeSymlink {
			fl = append(fl, FlagSetuid)
		}
		if ch.Mode&0o002 != 0 && (ch.Type == TypeFile || ch.Type == TypeDir) {
			fl = append(fl, FlagWorldWritable)
		}
		if ch.Type == TypeSymlink && outside(ch.Path, ch.Target) {
			fl = append(fl, FlagOutsideLink)
		}
		if ch.Type == TypeFile && ch.Size > LargeSize {
			fl = append(fl, FlagLarge)
		}
		if ch.Type == TypeFile && binary {
			fl = append(fl, FlagBinary)
		}
		if ch.Type == TypeSpecial {
			fl = append(fl, FlagSpecial)
		}
	}
	if (ch.Base != nil && ch.Base.CtimeNS >= c.started && !c.landedAs(ch) || c.removedSinceLanded(ch)) && !slices.Contains(fl, FlagConflict) {
		fl = append(fl, FlagConflict)
	}
	slices.Sort(fl)
	ch.Flags = fl
	c.changes = append(c.changes, ch)
	return nil
}

// outside reports whether a link at rel with text target points outside
// the workspace, read lexically.
func outside(rel, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") {
		return true
	}
	j := path.Join(path.Dir(rel), target)
	return j == ".." || strings.HasPrefix(j, "../")
}

// sniffer sees the first bytes of a content, and whether all of it is
// UTF-8.
type sniffer struct {
	n       int
	nul     bool
	invalid bool
	carry   []byte // the start of a character cut at a write's end
}

func (s *sniffer) Write(p []byte) (int, error) {
	if s.n < 8000 && slices.Contains(p[:min(len(p), 8000-s.n)], 0) {
		s.nul = true
	}
	s.n += len(p)
	if s.invalid {
		return len(p), nil
	}
	b := p
	if len(s.carry) > 0 {
		// Complete the character the last write cut.
		need := 4 - len(s.carry)
		head := append(s.carry, p[:min(need, len(p))]...)
		if !utf8.FullRune(head) {
			s.carry = head
			return len(p), nil
		}
		r, size := utf8.DecodeRune(head)
		if r == utf8.RuneError && size <= 1 {
			s.invalid = true
			return len(p), nil
		}
		b, s.carry = p[size-len(s.carry):], s.carry[:0]
	}
	// Keep up to 3 bytes of a character the next write completes.
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	s.invalid = !utf8.Valid(b[:cut])
	s.carry = append(s.carry, b[cut:]...)
	return len(p), nil
}

func (s *sniffer) binary() bool { return s.nul || s.invalid || len(s.carry) > 0 }

// grant gives the owner read (and, for directories, search) permission on
// every entry beneath d, within budget entries; modes are recorded from
// the entries' stat before, as captured.
// swapHook, set by tests only, runs between looking at an entry and
// changing or reading it: where a live layer could swap a link in, or grow
// a file.
var swapHook func(d *os.File, name string)

func grant(d *os.File, depth int, budget *int, modes map[uint64]uint32) error {
	if depth > maxDepth {
		return fmt.Errorf("the upper layer is deeper than %d directories", maxDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("upper layer: %w", err)
	}
	for _, name := range names {
		if *budget--; *budget < 0 {
			return fmt.Errorf("more than the entries allowed in the upper layer")
		}
		// The entry is pinned by a descriptor that never follows a link
		// (a live layer may swap one in), and changed through it only.
		pfd, err := unix.Openat(int(d.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("upper layer: %q: %w", name, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			unix.Close(pfd)
			return fmt.Errorf("upper layer: %q: %w", name, err)
		}
		if swapHook != nil {
			swapHook(d, name)
		}
		pinned := fmt.Sprintf("/proc/self/fd/%d", pfd)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if st.Mode&0o400 == 0 {
				modes[st.Ino] = st.Mode & 0o7777
				unix.Chmod(pinned, st.Mode&0o7777|0o400)
			}
		case unix.S_IFDIR:
			if st.Mode&0o500 != 0o500 {
				modes[st.Ino] = st.Mode & 0o7777
				unix.Chmod(pinned, st.Mode&0o7777|0o500)
			}
			sub, err := openDirAt(d, name)
			if err != nil {
				unix.Close(pfd)
				return fmt.Errorf("upper layer: %q: %w", name, err)
			}
			err = grant(sub, depth+1, budget, modes)
			sub.Close()
			if err != nil {
				unix.Close(pfd)
				return err
			}
		}
		unix.Close(pfd)
	}
	return nil
}
