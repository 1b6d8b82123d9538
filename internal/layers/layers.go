// Package layers keeps the on-disk directories of guarded workspaces'
// copy-on-write layers (workspace.mode: guarded) in a directory of
// cordon's state, which no sandbox sees.
//
// Each layer's directory NAME has a lock file beside it, NAME.lock, taken
// (flock) before the directory is made and held for as long as the layer is
// used: a layer whose lock nobody holds, or that has none, is one a killed
// cordon left, and the next Make in the same directory removes it. Nothing
// of a layer is ever left in the user's tree.
package layers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lockSuffix names the lock file beside a layer's directory.
const lockSuffix = ".lock"

// Layer is one layer's directory, locked while it is used.
type Layer struct {
	// Dir is the layer's directory: empty when made.
	Dir  string
	lock *os.File
}

// Make sweeps dir of the layers no process holds, then makes, locked, the
// layer dir/name, owned by owner (uid, gid) when it is not nil (the
// workspace's owner, as root: what lands is then the owner's, as a direct
// workspace's writes would be). name must be a plain file name.
func Make(dir, name string, owner *[2]int) (*Layer, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.HasSuffix(name, lockSuffix) {
		return nil, fmt.Errorf("layer %q: not a plain name", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	Sweep(dir)
	l := &Layer{Dir: filepath.Join(dir, name)}
	// The lock is taken before the directory is made, and on the very
	// lock file the name holds: a sweep that took the lock between its
	// creation and this flock has removed the file, and this layer is
	// refused instead of living without one.
	lock, err := os.OpenFile(l.Dir+lockSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", name, err)
	}
	l.lock = lock
	err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil && !sameFile(lock, l.Dir+lockSuffix) {
		err = errors.New("its lock file was taken away while it was made")
	}
	if err == nil {
		err = os.Mkdir(l.Dir, 0o700)
	}
	if err == nil && owner != nil {
		err = os.Chown(l.Dir, owner[0], owner[1])
	}
	if err != nil {
		l.Release()
		return nil, fmt.Errorf("layer %s: %w", name, err)
	}
	return l, nil
}

// Release removes the layer's directory and its lock; the layer must be
// in no use any more (its sandbox has ended).
func (l *Layer) Release() {
	if l == nil || l.lock == nil {
		return
	}
	Remove(l.Dir)
	if sameFile(l.lock, l.Dir+lockSuffix) {
		os.Remove(l.Dir + lockSuffix)
	}
	l.lock.Close()
	l.lock = nil
}

// sameFile says whether path names the file f is open on.
func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// Sweep removes the layers in dir that no process holds: those whose lock
// nobody holds, or that have none.
func Sweep(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		p := filepath.Join(dir, ent.Name())
		layer := strings.TrimSuffix(p, lockSuffix)
		lock, err := os.OpenFile(layer+lockSuffix, os.O_RDWR|unix.O_NOFOLLOW, 0)
		switch {
		case errors.Is(err, fs.ErrNotExist) && ent.IsDir():
			Remove(p)
		case err != nil:
		case unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil:
			Remove(layer)
			os.Remove(layer + lockSuffix)
		}
		if lock != nil {
			lock.Close()
		}
	}
}

// Remove removes a layer's directory, whatever modes the sandbox left on
// what it made (a directory of mode 000 cannot be emptied otherwise
// without privilege). Links are removed, never followed.
func Remove(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		if err != nil && d != nil && d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	os.RemoveAll(dir)
}
