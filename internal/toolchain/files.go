package toolchain

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Limits on what is read of the host's small files.
const (
	// maxShim bounds what is read of a file to tell whether it is a shim,
	// and of rustup's settings.
	maxShim = 64 << 10
	// maxVersionFile bounds what is read of a version file or a
	// rust-toolchain file.
	maxVersionFile = 4 << 10
	// maxVersions bounds the versions one version file selects.
	maxVersions = 8
	// maxVersionName bounds a version's or a toolchain's name.
	maxVersionName = 64
)

// readSmall reads at most max bytes of the regular file f. It never
// follows a link at f, and never waits: a FIFO or a device is refused
// before anything is read from it. owners, when not nil, are the users
// the file must belong to.
func readSmall(f string, max int64, owners []uint32) (string, error) {
	fh, err := os.OpenFile(f, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", f)
	}
	if owners != nil {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || !containsUID(owners, st.Uid) {
			return "", fmt.Errorf("%s belongs to another user", f)
		}
	}
	b, err := io.ReadAll(io.LimitReader(fh, max))
	return string(b), err
}

func containsUID(uids []uint32, u uint32) bool {
	for _, x := range uids {
		if x == u {
			return true
		}
	}
	return false
}

// trustedOwners are the users whose version files cordon reads: root,
// cordon's own user, and the owner of the directory it was started in
// (root running cordon in a user's project).
func trustedOwners(cwd string) []uint32 {
	out := []uint32{0, uint32(os.Geteuid())}
	if fi, err := os.Stat(cwd); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			out = append(out, st.Uid)
		}
	}
	return out
}

// searchDirs are the directories whose version files apply where cordon
// was started: cwd and its parents up to the root, as the version managers
// look, but leaving out each directory another user may write to (one
// writable by anyone, such as /tmp, or by a group not cordon's, or owned
// by a user not in owners), whose version file anyone could have put there.
func searchDirs(cwd string, owners []uint32) []string {
	if cwd == "" || !filepath.IsAbs(cwd) {
		return nil
	}
	gids := []uint32{uint32(os.Getegid())}
	if fi, err := os.Stat(cwd); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			gids = append(gids, st.Gid)
		}
	}
	var out []string
	for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			perm := fi.Mode().Perm()
			if ok && containsUID(owners, st.Uid) && perm&0o002 == 0 && (perm&0o020 == 0 || containsUID(gids, st.Gid)) {
				out = append(out, d)
			}
		}
		if d == "/" {
			return out
		}
	}
}

// validVersion reports whether v is a version or toolchain name cordon
// follows and shows: at most maxVersionName bytes of letters, digits and
// ._+- in /-separated parts (pyenv-virtualenv's 3.11.7/envs/web), each
// beginning with a letter or digit.
func validVersion(v string) bool {
	if v == "" || len(v) > maxVersionName {
		return false
	}
	for _, part := range strings.Split(v, "/") {
		if part == "" || !alnum(part[0]) {
			return false
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !alnum(c) && !strings.ContainsRune("._+-", rune(c)) {
				return false
			}
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
