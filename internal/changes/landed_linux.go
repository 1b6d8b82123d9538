package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// Landed is a path cordon landed from a layer that stays in use (a
// guarded sandbox of cordon serve, which runs many commands): the change
// time the landing left the host's path with, and the change time of the
// layer's file it came from (0: not a file). The path is then in the
// layer and on the host alike, and the next capture of the layer is told
// (Limits.Landed): a host path whose change time is still Host was changed
// by nobody but cordon, which is no conflict; a file whose two change
// times are both still these is unchanged, and is not read again.
//
// A host path changed since it landed is a conflict unless it is still as
// it landed all the same: its mode is Mode and its content SHA256
// (rewritten with the same bytes), or it is a git index whose entries are still Index's (indexKey:
// a git status on the host refreshed only what the index caches of the
// files' state). Then the sandbox's new version replaces it, as it would
// have the version that landed.
type Landed struct {
	Host, Upper int64
	UpperIno    uint64 // the layer's file, with Upper
	Mode        uint32 // its permission bits on the host
	SHA256      string
	Index       string
}

// landedAs says whether the host's state of ch's path is still as cordon
// landed it (Limits.Landed): no conflict.
func (c *capturer) landedAs(ch Change) bool {
	k, ok := c.lim.Landed[ch.Path]
	switch {
	case !ok || ch.Base == nil:
		return false
	case k.Host == ch.Base.CtimeNS:
		return true
	case ch.OldType != TypeFile || ch.OldSHA256 == "" || ch.OldMode != k.Mode:
		return false
	}
	return ch.OldSHA256 == k.SHA256 || c.sameIndex[ch.Path]
}

// checkIndex notes whether the host's file name in host (at rel p),
// changed since it landed as a git index, still holds the entries it
// landed with (see Landed).
func (c *capturer) checkIndex(host *os.File, name, p string, h *unix.Stat_t) {
	k, ok := c.lim.Landed[p]
	if !ok || k.Index == "" || h.Ctim.Nano() == k.Host || h.Size > maxIndex {
		return
	}
	if key, ok := readIndexKey(host, name); ok && key == k.Index {
		c.sameIndex[p] = true
	}
}

// readIndexKey is the indexKey of the file name in d.
func readIndexKey(d *os.File, name string) (string, bool) {
	data, ok := readIndex(d, name)
	if !ok {
		return "", false
	}
	return indexKey(data)
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
	if k, ok := c.lim.Landed[p]; ok && h.Ctim.Nano() == k.Host {
		c.still[p] = k
	}
}

// sameAsLanded says whether the file p, u in the layer and h on the host,
// is as its landing left both.
func (c *capturer) sameAsLanded(p string, u, h *unix.Stat_t) bool {
	k, ok := c.still[p]
	return ok && k.Upper != 0 && u.Ctim.Nano() == k.Upper && u.Ino == k.UpperIno && u.Mode&unix.S_IFMT == unix.S_IFREG && h.Mode&unix.S_IFMT == unix.S_IFREG &&
		u.Size == h.Size && u.Mode&07777 == h.Mode&07777
}

// sameAsHost notes the file p, u in the layer, as read now to hold what
// the host's h holds (sum, and the same mode), for a layer that stays in
// use: as a landing would have left them, so that the next capture does
// not read either again while both stay as they are, and takes a change
// the sandbox makes of it for one made on what the host holds.
func (c *capturer) sameAsHost(p string, u, h *unix.Stat_t, sum string) {
	if c.lim.Landed == nil {
		return
	}
	c.still[p] = Landed{Host: h.Ctim.Nano(), Upper: u.Ctim.Nano(), UpperIno: u.Ino, Mode: h.Mode & 07777, SHA256: sum}
}

// removedSinceLanded says whether ch adds a path cordon landed from this
// layer that the host has removed since: a conflict (the layer still
// holds it, so it would come back), which stays one while it waits.
func (c *capturer) removedSinceLanded(ch Change) bool {
	if ch.Kind != Added || ch.Base != nil {
		return false
	}
	k, ok := c.lim.Landed[ch.Path]
	if ok {
		c.still[ch.Path] = k
	}
	return ok
}

// Remember returns what the next capture of the layer s was captured
// from, a layer that stays in use, is to know of what landed from it
// (Limits.Landed): the landings s's capture found still true (before, for
// a set loaded rather than captured), and the paths rep says landed from s
// now (by Land or Apply), each with the change time it has on the host
// now and the one the layer's file had when s was captured, and the
// directories above them, whose change times the landing changed too. A
// host path changed between the landing and this look is taken as the
// landing left it: cordon cannot tell.
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
	note := func(p string) {
		h := statBeneath(host, p)
		if h == nil {
			delete(out, p)
			return
		}
		u := s.ufile[p]
		k := Landed{Host: h.Ctim.Nano(), Upper: u.ctime, UpperIno: u.ino, Mode: h.Mode & 07777, SHA256: sums[p]}
		if at, ok := rep.placed[p]; ok {
			// As Apply left it, the moment after: not as it is now.
			k.Host, k.Mode = at.ctime, at.mode
		}
		if path.Base(p) == "index" && k.SHA256 != "" && h.Mode&unix.S_IFMT == unix.S_IFREG && h.Size <= maxIndex {
			k.Index = landedIndexKey(host, p, k.SHA256)
		}
		out[p] = k
	}
	dirs := map[string]bool{}
	for _, p := range append(append([]string(nil), rep.Applied...), rep.Already...) {
		note(p)
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		note(d)
	}
	return out
}
