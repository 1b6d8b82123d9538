package protect

import (
	"bufio"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// credentials are what, found at the top of a directory, make it a home
// directory or a store of secrets rather than a project.
var credentials = []string{
	".ssh", ".aws", ".gnupg", ".kube", ".azure", ".docker/config.json",
	".config/gcloud", ".netrc", ".git-credentials", ".password-store", ".pgpass",
}

// Credentials are the names (paths relative to a directory) that, at the
// top of a directory, make it a home directory or a store of secrets.
func Credentials() []string { return slices.Clone(credentials) }

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
func Homes() []string {
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

// Sensitive says why the directory root must not be a writable part of a
// sandbox's view (a user's home directory, or one holding credentials), or
// "". Home directories are those Homes lists.
func Sensitive(root string) string {
	root = filepath.Clean(root)
	if slices.Contains(Homes(), root) {
		return root + " is a home directory"
	}
	for _, c := range credentials {
		if _, err := os.Lstat(filepath.Join(root, c)); err == nil {
			return root + " holds " + c
		}
	}
	return ""
}
