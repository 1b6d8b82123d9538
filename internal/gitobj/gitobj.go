// Package gitobj reads git's loose objects from their bytes, for a person
// to see what a change set does to a repository without running git on
// data a sandbox wrote: a hostile repository is only ever parsed here,
// within bounds (bytes inflated, entries), never obeyed.
//
// The package is pure: its callers find the objects (package changes).
package gitobj

import (
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrTooLarge is an object that inflates past the bound it is read with.
var ErrTooLarge = errors.New("git object larger than the bound")

// Read inflates a loose object (zlib) of at most max bytes and splits
// its header: its type (commit, tree, blob, tag) and body.
func Read(compressed []byte, max int) (typ string, body []byte, err error) {
	zr, err := zlib.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return "", nil, fmt.Errorf("git object: %w", err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return "", nil, fmt.Errorf("git object: %w", err)
	}
	if len(raw) > max {
		return "", nil, ErrTooLarge
	}
	head, body, ok := bytes.Cut(raw, []byte{0})
	if !ok {
		return "", nil, errors.New("git object: no header")
	}
	typ, size, ok := strings.Cut(string(head), " ")
	n, err := strconv.Atoi(size)
	if !ok || err != nil || n != len(body) {
		return "", nil, fmt.Errorf("git object: header %q does not match its body", head)
	}
	switch typ {
	case "commit", "tree", "blob", "tag":
		return typ, body, nil
	}
	return "", nil, fmt.Errorf("git object: unknown type %q", typ)
}

// Commit is what a person reads of a commit.
type Commit struct {
	Tree    string
	Parents []string
	Author  string // name <email>, without the date
	Subject string // the message's first line
}

// ParseCommit reads a commit's body.
func ParseCommit(body []byte) (Commit, error) {
	var c Commit
	head, msg, _ := bytes.Cut(body, []byte("\n\n"))
	for _, line := range strings.Split(string(head), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "tree":
			c.Tree = v
		case "parent":
			c.Parents = append(c.Parents, v)
		case "author":
			if i := strings.LastIndexByte(v, '>'); i >= 0 {
				v = v[:i+1]
			}
			c.Author = v
		}
	}
	if !ValidID(c.Tree) {
		return Commit{}, errors.New("git commit: no tree")
	}
	for _, p := range c.Parents {
		if !ValidID(p) {
			return Commit{}, fmt.Errorf("git commit: parent %q", p)
		}
	}
	c.Subject, _, _ = strings.Cut(string(msg), "\n")
	return c, nil
}

// ValidID reports whether s is an object id (SHA-1 or SHA-256, lower-case
// hex).
func ValidID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// Entry is one name of a tree.
type Entry struct {
	Mode string // 100644, 100755, 120000 (a link), 40000 (a tree), 160000 (a submodule)
	Name string
	ID   string
}

// Tree reports whether e is a tree.
func (e Entry) Tree() bool { return e.Mode == "40000" }

// ParseTree reads a tree's body, its ids of idLen bytes (20 for SHA-1, 32
// for SHA-256), at most max entries.
func ParseTree(body []byte, idLen, max int) ([]Entry, error) {
	var out []Entry
	for len(body) > 0 {
		if len(out) >= max {
			return nil, fmt.Errorf("git tree: more than %d entries", max)
		}
		sp := bytes.IndexByte(body, ' ')
		nul := bytes.IndexByte(body, 0)
		if sp < 0 || nul < sp || len(body) < nul+1+idLen {
			return nil, errors.New("git tree: truncated")
		}
		out = append(out, Entry{Mode: string(body[:sp]), Name: string(body[sp+1 : nul]), ID: hex.EncodeToString(body[nul+1 : nul+1+idLen])})
		body = body[nul+1+idLen:]
	}
	return out, nil
}
