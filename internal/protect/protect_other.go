//go:build !linux

package protect

import (
	"errors"
	"os"
)

type kind int

const (
	kindNone kind = iota
	kindDir
	kindFile
	kindMultiLink
	kindLink
)

type ghost struct {
	rel      string
	dev, ino uint64
	ctime    int64
	file     bool
	content  string
}

var errUnsupported = errors.New("protected paths need Linux")

func openRoot(root string) (*os.File, error) { return nil, errUnsupported }
func lstat(*os.File, string) (kind, error)   { return kindNone, errUnsupported }
func mkGhost(*os.File, string, bool, string) (ghost, *os.File, error) {
	return ghost{}, nil, errUnsupported
}
func (ghost) remove(string) bool               { return false }
func (p *Plan) hold(*os.File) error            { return nil }
func denied(error) bool                        { return false }
func names(*os.File, string, int) []string     { return nil }
func readSmall(*os.File, string, int64) []byte { return nil }
func readlink(*os.File, string) (string, bool) { return "", false }

func (p *Plan) keepModes(*os.File) {}

func (p *Plan) restoreModes() {}
