// Package hostfile is how cordon opens files on the host once a sandbox
// could have touched them: outcomes, profiles, configurations, approval
// records and probe reports. Whatever a sandbox wrote is hostile: a link
// planted where cordon will write turns cordon, often running as root, into
// a deputy that overwrites the link's target; a FIFO makes it hang; a link
// to /dev/zero makes it read forever. One rule holds for every such file:
// no symbolic link is followed anywhere in its path, only a regular file
// with a single name is read or replaced, and no more than a fixed amount
// is read. A file is written by creating a new one beside it and renaming
// it into place, so no existing inode is ever written through.
package hostfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxRead is the most ReadFile reads unless told otherwise: far more than
// any profile, configuration or record cordon keeps.
const MaxRead = 4 << 20

// Errors a path can be refused with, wrapped in an *os.PathError.
var (
	ErrSymlink  = errors.New("the path contains a symbolic link, which cordon does not follow here; give the path it resolves to")
	ErrNotFile  = errors.New("not a regular file (a FIFO, device, socket or directory is refused)")
	ErrHardLink = errors.New("the file has more than one name (a hard link), which cordon refuses here")
	ErrTooLarge = errors.New("the file is larger than cordon reads here")
)

// ReadFile reads the regular, singly linked file at path, reached without
// any symbolic link, and at most max bytes of it (MaxRead when max is 0):
// a larger file is an error, not a truncated read.
func ReadFile(path string, max int64) ([]byte, error) {
	if max <= 0 {
		max = MaxRead
	}
	if weak() { // test builds only: links followed, any kind of file; still bounded
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, max))
	}
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := regular(f, path); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > max {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)}
	}
	return b, nil
}

// regular checks that f, opened from path, is a regular file with one name.
func regular(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &os.PathError{Op: "open", Path: path, Err: ErrNotFile}
	}
	if links(fi) > 1 {
		return &os.PathError{Op: "open", Path: path, Err: ErrHardLink}
	}
	return nil
}

// WriteFile replaces the file at path with data, as Prepare and Write do.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	t, err := Prepare(path)
	if err != nil {
		return err
	}
	defer t.Close()
	return t.Write(data, perm)
}
