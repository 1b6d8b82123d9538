// Package du measures a directory tree that a sandbox wrote: the files,
// directories and links it holds and the bytes they take on disk, without
// following anything (every name in it is the sandbox's choosing: only
// directories are opened, each with O_NOFOLLOW beneath a descriptor), and
// without walking further than a bound allows, so that measuring costs no
// more than the bound lets the sandbox make.
package du

import "errors"

// Bound is where a walk stops: past Bytes bytes or Inodes entries (0: no
// bound of that kind).
type Bound struct {
	Bytes, Inodes int64
}

// Use is what a walk counted; Past says it stopped past its bound, its
// counts then being where it stopped. Unseen counts the directories it
// did not enter (deeper than MaxDepth, or closed to the walker) and the
// entries it could not look at: what they hold is not in Bytes and
// Inodes, and only a bound on the file system (or a walk that opens them
// up) bounds it.
type Use struct {
	Bytes, Inodes int64
	Past          bool
	Unseen        int64
}

// MaxDepth bounds the directories a walk descends: deeper ones are
// counted, not entered (overlay itself refuses paths past PATH_MAX).
const MaxDepth = 256

// Walk counts what the directory dirfd holds, at any depth, until past b.
// dirfd stays open. A directory the sandbox made unreadable (chmod 000),
// or deeper than MaxDepth, is counted, not entered, and counted in Unseen;
// an entry gone since it was listed is skipped, and so is a directory
// removed since it was opened (it was empty). It is WalkParallel with one
// worker.
func Walk(dirfd int, b Bound) (Use, error) { return WalkParallel(dirfd, 1, b) }

// errPast ends a walk that is past its bound.
var errPast = errors.New("past the bound")
