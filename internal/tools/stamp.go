package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A file server that is sent a resolved path walks it again itself, by
// name, when it acts: whoever can change an entry on the way in between
// can make it open another file. Its directories say whether that
// happened. Adding, removing or renaming an entry of a directory sets its
// change time, so while the device, inode and change time of every
// directory on a path, from the root to the file's parent, stay the same,
// every name on the path names what it named: the stamp of the path.
//
// The change time comes from a clock that ticks in steps of a few
// milliseconds: a change made in the same step as the last one leaves it
// as it was. A stamp is settled when every change time in it is older than
// SettleMargin when the stamp is taken; a later change then shows.

// SettleMargin is how old a change time must be for a stamp to be settled:
// longer than any step of the kernel's clock (10 ms at 100 Hz). A change
// time may lag the time it was made by as much.
const SettleMargin = 20 * time.Millisecond

// settleTries is how many times ResolveMain looks again at a path whose
// stamp is not settled, SettleMargin apart, before it answers it as such.
const settleTries = 10

// stampOf is the stamp of the resolved path p, the stamp of the
// directories above its parent (above: what a write in the parent leaves
// as it was), and whether they are settled. Directories above top are
// left out.
func stampOf(p, top string) (stamp, above string, settled bool, err error) {
	now := time.Now()
	h := sha256.New()
	settled = true
	dir := filepath.Dir(p)
	var dirs []string
	for d := dir; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == "/" {
			break
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		var st unix.Stat_t
		if i == 0 {
			above = hex.EncodeToString(h.Sum(nil)[:16])
		}
		if err := unix.Lstat(dirs[i], &st); err != nil {
			return "", "", false, fmt.Errorf("stamp of %s: %w", dirs[i], err)
		}
		if !within(dirs[i], top) || privateDir(dirs[i]) {
			// Made anew by each sandbox (the root, the directories
			// that hold its mounts): not the server's, and no one
			// else's to change.
			continue
		}
		ct := time.Unix(st.Ctim.Unix())
		if now.Sub(ct) < SettleMargin {
			settled = false
		}
		fmt.Fprintf(h, "%s\x00%d:%d:%d:%d:%o\n", dirs[i], st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec, st.Mode)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), above, settled, nil
}

// ResolvePaths resolves paths and stamps what each names (the directories
// from top down, "/" for all), all of them again while a stamp is not
// settled, at most settleTries times: the resolve mode's answer.
func ResolvePaths(paths []string, top string) []Resolved {
	for try := 0; ; try++ {
		out := make([]Resolved, 0, len(paths))
		settledAll := true
		for _, p := range paths {
			f, err := Resolve(p)
			if err == nil {
				var settled bool
				f.Stamp, f.Above, settled, err = stampOf(f.Path, top)
				f.Unsettled = !settled
				settledAll = settledAll && settled
			}
			if err != nil {
				out = append(out, Resolved{Error: err.Error()})
				continue
			}
			out = append(out, Resolved{File: f})
		}
		if settledAll || try == settleTries-1 {
			return out
		}
		time.Sleep(SettleMargin)
	}
}

// privateDir reports whether the directory dir is on a file system the
// sandbox made for itself (see private).
func privateDir(dir string) bool {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return private(fd)
}

// within reports whether dir is top or under it.
func within(dir, top string) bool {
	return top == "/" || dir == top || strings.HasPrefix(dir, top+"/")
}
