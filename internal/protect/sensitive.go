package protect

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// EvalSymlinks is filepath.EvalSymlinks, answering with one lstat for a
// path that does not exist, as most of the paths that Homes and the
// credentials under them name do not: the walk costs a system call and an
// allocation for every component, for every account of the host. Only a
// path that is not there is answered so: the kernel follows at most 40
// links in a lookup, filepath.EvalSymlinks 255, so a longer chain fails
// the lstat (ELOOP) and is walked.
func EvalSymlinks(p string) (string, error) {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// Homes are the home directories cordon knows of: the current user's,
// $HOME's, and every account's in /etc/passwd, each as given and, where a
// link leads elsewhere, as its real path too (a path found by following
// links names a home by the latter); never "/".
//
// A command's start asks several times within milliseconds: what was found
// is kept for homesFresh, while /etc/passwd and $HOME are as they were.
func Homes() []string {
	key := homesKey()
	homesMemo.Lock()
	defer homesMemo.Unlock()
	if homesMemo.homes != nil && homesMemo.key == key && time.Since(homesMemo.at) < homesFresh {
		return slices.Clone(homesMemo.homes)
	}
	homes := findHomes()
	homesMemo.key, homesMemo.at, homesMemo.homes = key, time.Now(), homes
	return slices.Clone(homes)
}

// homesFresh is how long Homes keeps what it found.
const homesFresh = time.Second

var homesMemo struct {
	sync.Mutex
	key   string
	at    time.Time
	homes []string
}

// homesKey names what Homes reads: $HOME, and /etc/passwd's identity,
// size and change time.
func homesKey() string {
	h, _ := os.UserHomeDir()
	var st unix.Stat_t
	if unix.Stat("/etc/passwd", &st) != nil {
		return h
	}
	return fmt.Sprintf("%s\x00%d %d %d %d.%d", h, st.Dev, st.Ino, st.Size, st.Ctim.Sec, st.Ctim.Nsec)
}

func findHomes() []string {
	homes := map[string]bool{}
	if h, err := os.UserHomeDir(); err == nil {
		homes[filepath.Clean(h)] = true
	}
	if f, err := os.Open("/etc/passwd"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Split(sc.Text(), ":"); len(fields) >= 6 && fields[5] != "" {
				homes[filepath.Clean(fields[5])] = true
			}
		}
		f.Close()
	}
	for h := range maps.Clone(homes) {
		if real, err := EvalSymlinks(h); err == nil {
			homes[real] = true
		}
	}
	delete(homes, "/")
	return slices.Sorted(maps.Keys(homes))
}

// Bounds of Sensitive's search, variables for tests. A repository of
// 50,000 files (57,000 names in 7,600 directories) is read in about
// 0.1 s; past the bounds the directory is refused, since what was not read
// may hold a key.
var (
	sensitiveEntries = 1 << 20
	sensitiveDepth   = 64
)

// Sensitive says why the directory root must not be a sandbox's workspace
// or a writable part of its view, or "": it is a home directory (one
// Homes lists), or holds one, or holds a store of secrets (Credentials:
// .ssh, .aws, .netrc, ...) at any depth, or is too large to be searched
// for them whole (1,048,576 names, 64 directories deep).
// A link is judged by its own name; what it leads to is not in the view
// through root. What is found is named relative to root.
func Sensitive(root string) string {
	root = filepath.Clean(root)
	homes := Homes()
	if slices.Contains(homes, root) {
		return root + " is a home directory"
	}
	found, err := Search{MaxEntries: sensitiveEntries, MaxDepth: sensitiveDepth, StoresOnly: true, Homes: homes}.In(root)
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return le.Error() + " (a narrower workspace is searched whole)"
		}
		return "cordon could not search it for credentials: " + err.Error()
	}
	var what []string
	for _, f := range found {
		if f.Home {
			what = append(what, "the home directory "+f.Rel)
		} else {
			what = append(what, f.What())
		}
	}
	return holds(root, what)
}

// holds says that root holds what (up to three named), or "" for nothing.
func holds(root string, what []string) string {
	if len(what) == 0 {
		return ""
	}
	if len(what) > 3 {
		what = append(what[:3], fmt.Sprintf("and %d more", len(what)-3))
	}
	return root + " holds " + strings.Join(what, ", ")
}
