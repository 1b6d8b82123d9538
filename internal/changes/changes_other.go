//go:build !linux

package changes

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

const noFollow = syscall.O_NOFOLLOW

var errLinux = errors.New("a reviewed workspace needs Linux")

// Capture needs Linux.
func Capture(layer *os.File, workspace, dir, run string, started time.Time, lim Limits) (*Set, error) {
	return nil, errLinux
}

// Apply needs Linux.
func Apply(s *Set, dir string, paths []string, o ApplyOptions) (*Report, error) {
	return nil, errLinux
}

// Diff needs Linux.
func Diff(w io.Writer, s *Set, dir string, paths []string) error { return errLinux }

// Git needs Linux.
func Git(s *Set, dir string) *GitActivity { return nil }

// Land needs Linux.
func Land(s *Set, layer *os.File, dir string, rv Review, o ApplyOptions) (*Report, *Set, error) {
	return nil, nil, errLinux
}
