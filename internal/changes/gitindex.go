package changes

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// maxIndex bounds the git index read to compare it (indexKey), and
// maxIndexNames the bytes of the paths it holds, in all.
const (
	maxIndex      = 64 << 20
	maxIndexNames = 128 << 20
)

// indexKey is what a git index (.git/index, format versions 2 to 4) says
// of the tree, without the file system's state it caches: the SHA-256 of
// each entry's path, mode, object id, stage and flags, in order. Two
// indexes with one key differ only in what git refreshes by itself (a
// git status on the host rewrites the index with the files' new times),
// never in what is staged. ok is false for what is no index git would
// read; object ids of 20 bytes (SHA-1) are tried first, then of 32.
func indexKey(data []byte) (key string, ok bool) {
	for _, oid := range []int{20, 32} {
		if k, ok := indexKeyWith(data, oid); ok {
			return k, true
		}
	}
	return "", false
}

func indexKeyWith(data []byte, oid int) (string, bool) {
	if len(data) < 12+oid || !bytes.Equal(data[:4], []byte("DIRC")) {
		return "", false
	}
	version := binary.BigEndian.Uint32(data[4:8])
	n := binary.BigEndian.Uint32(data[8:12])
	if version < 2 || version > 4 {
		return "", false
	}
	end := len(data) - oid // the trailing checksum
	h := sha256.New()
	var prev []byte
	off, hashed := 12, 0
	for i := uint32(0); i < n; i++ {
		start := off
		fixed := 40 + oid + 2
		if off+fixed > end {
			return "", false
		}
		mode := data[off+24 : off+28]
		id := data[off+40 : off+40+oid]
		flags := binary.BigEndian.Uint16(data[off+40+oid:])
		off += fixed
		var ext []byte
		if flags&0x4000 != 0 {
			if version < 3 || off+2 > end {
				return "", false
			}
			ext = data[off : off+2]
			off += 2
		}
		var name []byte
		if version == 4 {
			strip, w := binary.Uvarint(data[off:end])
			if w <= 0 || strip > uint64(len(prev)) {
				return "", false
			}
			off += w
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return "", false
			}
			name = append(append([]byte(nil), prev[:len(prev)-int(strip)]...), data[off:off+nul]...)
			off += nul + 1
		} else {
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return "", false
			}
			name = data[off : off+nul]
			// 1 to 8 NULs pad the entry to a multiple of 8 bytes.
			off = start + (off-start+nul+8)&^7
			if off > end {
				return "", false
			}
		}
		// Names are as long as a path may be, and what a hostile index
		// can make hashed is bounded (a version 4 name repeats the one
		// before it).
		if len(name) > maxPath {
			return "", false
		}
		if hashed += len(name); hashed > maxIndexNames {
			return "", false
		}
		prev = name
		var rec [8]byte
		binary.BigEndian.PutUint32(rec[:4], uint32(len(name)))
		binary.BigEndian.PutUint16(rec[4:6], flags&0xf000) // stage and flag bits, not the name's length
		h.Write(rec[:6])
		h.Write(ext)
		h.Write(mode)
		h.Write(id)
		h.Write(name)
	}
	// Extensions follow, each a 4-byte signature and a 4-byte length:
	// what they cache (trees, untracked files) is git's to refresh; a
	// file that does not end where they say is no index.
	for off < end {
		if off+8 > end {
			return "", false
		}
		if string(data[off:off+4]) == "link" {
			// A split index: its entries are in the shared index this
			// names, and its deletions in the extension. Not compared.
			return "", false
		}
		size := binary.BigEndian.Uint32(data[off+4 : off+8])
		if uint64(off)+8+uint64(size) > uint64(end) {
			return "", false
		}
		off += 8 + int(size)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
