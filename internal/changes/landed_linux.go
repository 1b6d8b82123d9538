package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// Landed is what cordon knows of a path of a layer that stays in use (a
// guarded sandbox of cordon serve, which runs many commands) once a
// landing made the host's path what the layer's entry holds, or a capture
// found the two alike: how the host's path was left, and which entry of
// the layer it matched. The next capture is told (Limits.Landed):
//
//   - The layer's entry unchanged since (the same inode and change time,
//     Upper and UpperIno; checked by content too when UpperRacy): the
//     sandbox has not changed the path since, and whatever the host did to
//     it since (an edit, a removal, a new file where the sandbox deleted
//     one) is the host's. The layer's copy is stale, no change of the
//     sandbox's, and nothing of it lands.
//   - A file of the host still of Mode and content SHA256, or a git index
//     still with Index's entries (indexKey: a git status on the host
//     refreshed only what the index caches of the files' state): the base
//     the sandbox changed is what the host holds, and the sandbox's change
//     of it is no conflict. Any other path: the same when its change time
//     and inode are still Host and HostIno.
//   - A path the host removed since, that the sandbox has changed since:
//     a conflict.
//
// A change time of a file of the layer within racyMargin of when it was
// noted may share its clock tick with a write made after: UpperRacy then
// says to check the content as well.
type Landed struct {
	Host      int64  // the host path's change time; 0: absent
	HostIno   uint64 // and its inode
	Upper     int64  // the layer entry's change time; 0: not noted
	UpperIno  uint64 // and its inode
	UpperRacy bool   // Upper is within racyMargin of when it was noted
	Mode      uint32 // the host file's permission bits
	SHA256    string // the host file's content
	Index     string // the host file's indexKey, for a git index
}

// racyMargin is how close to a look a change time is not trusted alone:
// more than the coarsest clock tick the kernel stamps files with.
const racyMargin = 20 * time.Millisecond

// landedAs says whether the host's state of ch's path is still the base
// the sandbox changed (see Landed): no conflict.
func (c *capturer) landedAs(ch Change) bool {
	k, ok := c.lim.Landed[ch.Path]
	switch {
	case !ok || ch.Base == nil || k.Host == 0:
		return false
	case ch.OldType == TypeFile:
		return ch.OldSHA256 != "" && ch.OldMode == k.Mode && (ch.OldSHA256 == k.SHA256 || c.sameIndex[ch.Path])
	}
	return k.Host == ch.Base.CtimeNS && k.HostIno == ch.Base.Ino
}

// stale says whether the layer's entry p (u, name in up) is as it was
// noted (see Landed): the sandbox has not changed it since.
func (c *capturer) stale(up *os.File, name, p string, u *unix.Stat_t) bool {
	k, ok := c.lim.Landed[p]
	if !ok || k.UpperIno == 0 || k.UpperIno != u.Ino || k.Upper != u.Ctim.Nano() {
		return false
	}
	// Only a regular file changes in place, keeping its inode: another
	// entry made in the same tick is another inode.
	if k.UpperRacy && u.Mode&unix.S_IFMT == unix.S_IFREG {
		if k.SHA256 == "" {
			return false
		}
		_, sum, _, err := c.hashAt(up, name, nil, u.Size)
		if err != nil || sum != k.SHA256 {
			return false
		}
		k.UpperRacy = c.racy(u.Ctim.Nano())
	}
	c.still[p] = k
	return true
}

// racy says whether a change time is within racyMargin of the capture's
// start.
func (c *capturer) racy(ctime int64) bool { return ctime >= c.begun-int64(racyMargin) }

// indexWanted says whether the host's file p (h), changed since it
// landed as a git index, is to be compared by its entries (see Landed).
func (c *capturer) indexWanted(p string, h *unix.Stat_t) bool {
	k, ok := c.lim.Landed[p]
	return ok && k.Index != "" && h.Ctim.Nano() != k.Host && h.Size <= maxIndex
}

// checkIndex notes whether data, the host's file p as indexWanted asked
// for it, still holds the entries it landed with.
func (c *capturer) checkIndex(p string, data []byte) {
	if key, ok := indexKey(data); ok && key == c.lim.Landed[p].Index {
		c.sameIndex[p] = true
	}
}

// readIndex reads the file name in d, when it is no larger than an index
// is compared.
func readIndex(d *os.File, name string) ([]byte, bool) {
	f, _, err := openFileAt(d, name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIndex+1))
	if err != nil || len(data) > maxIndex {
		return nil, false
	}
	return data, true
}

// landedIndexKey is the indexKey of the host's file p, a git index that
// landed with content sum; "" when it holds another content by now (the
// host changed it since: the key would be the host's, not the landing's).
func landedIndexKey(host *os.File, p, sum string) string {
	dir, err := openBeneath(host, path.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if err != nil {
		return ""
	}
	defer dir.Close()
	data, ok := readIndex(dir, path.Base(p))
	if !ok {
		return ""
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
		return ""
	}
	key, _ := indexKey(data)
	return key
}

// noteLanded notes a landing still true of the host's path p (h).
func (c *capturer) noteLanded(p string, h *unix.Stat_t) {
	if k, ok := c.lim.Landed[p]; ok && h.Ctim.Nano() == k.Host && h.Ino == k.HostIno {
		c.still[p] = k
	}
}

// sameAsHost notes the file p, u in the layer, as read now to hold what
// the host's h holds (sum, and the same mode), for a layer that stays in
// use, as a landing would: the next capture reads neither again while the
// layer's stays as it is, and a change the sandbox then makes of it is
// one made on what the host holds.
func (c *capturer) sameAsHost(p string, u, h *unix.Stat_t, sum string) {
	if c.lim.Landed == nil {
		return
	}
	c.still[p] = Landed{Host: h.Ctim.Nano(), HostIno: h.Ino, Upper: u.Ctim.Nano(), UpperIno: u.Ino, UpperRacy: c.racy(u.Ctim.Nano()),
		Mode: h.Mode & 07777, SHA256: sum}
}

// removedSinceLanded says whether ch adds a path that was on the host when
// noted, and that the host has removed since while the sandbox changed it:
// a conflict (the layer still holds it, so it would come back), which
// stays one while it waits.
func (c *capturer) removedSinceLanded(ch Change) bool {
	if ch.Kind != Added || ch.Base != nil {
		return false
	}
	k, ok := c.lim.Landed[ch.Path]
	if ok && k.Host != 0 {
		c.still[ch.Path] = k
	}
	return ok && k.Host != 0
}

// Remember returns what the next capture of the layer s was captured
// from, a layer that stays in use, is to know of it (Limits.Landed): what
// s's capture found still true (before, for a set loaded rather than
// captured), and each path rep says landed from s now (by Land or Apply):
// the host's state the moment after it was written, the layer's entry it
// came from as the capture saw it (a deletion's whiteout too), and the
// directories above them, whose change times the landing changed.
func Remember(s *Set, rep *Report, before map[string]Landed) map[string]Landed {
	known := s.still
	if known == nil {
		known = before
	}
	out := make(map[string]Landed, len(known)+len(rep.Applied))
	for p, k := range known {
		out[p] = k
	}
	host, err := openRoot(s.Workspace)
	if err != nil {
		return out
	}
	defer host.Close()
	sums := map[string]string{}
	for _, c := range s.Changes {
		if c.Type == TypeFile && c.Kind != Deleted {
			sums[c.Path] = c.SHA256
		}
	}
	note := func(p string, own bool) {
		k := Landed{}
		if u, ok := s.ufile[p]; ok && own {
			k.Upper, k.UpperIno, k.UpperRacy = u.ctime, u.ino, u.racy
		}
		h := statBeneath(host, p)
		switch {
		case h == nil && k.UpperIno != 0:
			out[p] = k // deleted, by the layer's whiteout
			return
		case h == nil:
			delete(out, p)
			return
		}
		k.Host, k.HostIno, k.Mode = h.Ctim.Nano(), h.Ino, h.Mode&07777
		if at, ok := rep.placed[p]; ok && own {
			// As Apply left it, the moment after: not as it is now.
			k.Host, k.HostIno, k.Mode = at.ctime, at.ino, at.mode
			k.SHA256 = sums[p]
		}
		if path.Base(p) == "index" && k.SHA256 != "" && h.Mode&unix.S_IFMT == unix.S_IFREG && h.Size <= maxIndex {
			k.Index = landedIndexKey(host, p, k.SHA256)
		}
		out[p] = k
	}
	dirs := map[string]bool{}
	own := map[string]bool{}
	for _, p := range append(append([]string(nil), rep.Applied...), rep.Already...) {
		note(p, true)
		own[p] = true
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if !own[d] {
			note(d, false)
		}
	}
	return out
}
