package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
	"golang.org/x/text/unicode/norm"
)

// File is a path argument as the sandbox's view resolves it: the path
// every symlink on the way resolved (Path, absolute, without a link, "."
// or ".."), and the identity of what it names. For a file that does not
// exist yet, Dev and Ino are its parent directory's.
type File struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Dir    bool   `json:"dir,omitempty"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	// Links is the number of names of an existing file: more than one,
	// and the file has names the path does not say.
	Links uint64 `json:"links,omitempty"`
	// Stamp is the stamp of the directories on Path (see stampOf), Above
	// that of those above its parent, and Unsettled says they were not
	// settled: set by the resolve mode only.
	Stamp     string `json:"stamp,omitempty"`
	Above     string `json:"above,omitempty"`
	Unsettled bool   `json:"unsettled,omitempty"`
}

// maxLinks is how many symlinks one resolution follows, as the kernel's
// own bound (ELOOP).
const maxLinks = 40

// Resolve resolves path (absolute, or relative to the working directory)
// as the kernel would open it, following every symlink, and returns the
// file it names; a path whose last name does not exist names a file to be
// created in its parent, which must exist.
func Resolve(path string) (File, error) {
	if path == "" {
		return File{}, errors.New("empty path")
	}
	if strings.IndexByte(path, 0) >= 0 {
		return File{}, errors.New("the path holds a NUL byte")
	}
	if !filepath.IsAbs(path) {
		wd, err := os.Getwd()
		if err != nil {
			return File{}, err
		}
		path = wd + "/" + path
	}
	rest := strings.Split(path, "/")
	resolved := "/"
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		var st unix.Stat_t
		err := unix.Lstat(next, &st)
		if errors.Is(err, unix.ENOENT) && !more(rest) {
			var pst unix.Stat_t
			if err := unix.Stat(resolved, &pst); err != nil {
				return File{}, &os.PathError{Op: "stat", Path: resolved, Err: err}
			}
			if err := oneName(resolved, c); err != nil {
				return File{}, &os.PathError{Op: "resolve", Path: next, Err: err}
			}
			return File{Path: next, Dev: uint64(pst.Dev), Ino: pst.Ino}, nil
		}
		if err != nil {
			return File{}, &os.PathError{Op: "resolve", Path: next, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if links++; links > maxLinks {
				return File{}, &os.PathError{Op: "resolve", Path: path, Err: unix.ELOOP}
			}
			target, err := os.Readlink(next)
			if err != nil {
				return File{}, err
			}
			if strings.HasPrefix(target, "/") {
				resolved = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		resolved = next
		if more(rest) && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return File{}, &os.PathError{Op: "resolve", Path: next, Err: unix.ENOTDIR}
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(resolved, &st); err != nil {
		return File{}, &os.PathError{Op: "stat", Path: resolved, Err: err}
	}
	return File{Path: resolved, Exists: true, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR, Dev: uint64(st.Dev), Ino: st.Ino, Links: uint64(st.Nlink)}, nil
}

// maxNamesCompared bounds the entries of a directory a new name is
// compared with (oneName): past it, the name is refused.
const maxNamesCompared = 100000

// oneName checks that name, to be made in dir, is one name only: in
// Unicode normal form C, and the NFC form of no entry of dir. A tool (a
// file server, a shell's completion, a file system that normalises) may
// take a name for any entry whose NFC form it shares, and act on a file
// other than the one decided; a label rule written for one spelling would
// not see the other.
func oneName(dir, name string) error {
	if !norm.NFC.IsNormalString(name) {
		return fmt.Errorf("the name %q is not in Unicode normal form C (%q is): a tool may take it for another name", name, norm.NFC.String(name))
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	seen := 0
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if n != name && norm.NFC.String(n) == name {
				return fmt.Errorf("an entry named %q is there, the same name in Unicode normal form C", n)
			}
		}
		if seen += len(names); seen > maxNamesCompared {
			return fmt.Errorf("the directory holds more than %d entries to compare the new name with", maxNamesCompared)
		}
		if errors.Is(err, io.EOF) || err == nil && len(names) == 0 {
			return nil
		}
		if err != nil {
			return err // what cannot be compared is refused
		}
	}
}

// more reports whether names remain in a path's components.
func more(rest []string) bool {
	for _, c := range rest {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// openDecided opens exactly the file f that was decided on: every
// directory on its path is opened without following a link (the sandbox's
// seccomp filter refuses openat2, so RESOLVE_NO_SYMLINKS is done a name at
// a time with O_NOFOLLOW), and the object found must have the decided
// identity. A file decided as new is created with O_EXCL in the decided
// parent: if something took its name since, the call fails.
func openDecided(f File, flags int, perm uint32) (*os.File, error) {
	if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path || f.Path == "/" {
		return nil, fmt.Errorf("%q is not a resolved path", f.Path)
	}
	dir, base := filepath.Split(f.Path)
	pfd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for _, c := range strings.Split(strings.Trim(dir, "/"), "/") {
		if c == "" {
			continue
		}
		fd, err := unix.Openat(pfd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(pfd)
		if err != nil {
			return nil, changed(f, err)
		}
		pfd = fd
	}
	defer unix.Close(pfd)
	if !f.Exists {
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return nil, err
		}
		if !decided(&st, f, pfd) {
			return nil, changed(f, nil)
		}
		if flags&unix.O_CREAT != 0 {
			flags |= unix.O_EXCL
		}
	} else {
		// The identity is checked before the open (a FIFO put in the
		// file's place would block it) and after (the name may have been
		// swapped in between).
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, changed(f, err)
		}
		if !decided(&st, f, pfd) {
			return nil, changed(f, nil)
		}
		flags &^= unix.O_CREAT
	}
	fd, err := unix.Openat(pfd, base, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, perm)
	if err != nil {
		return nil, changed(f, err)
	}
	file := os.NewFile(uintptr(fd), f.Path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		file.Close()
		return nil, err
	}
	if f.Exists && !decided(&st, f, fd) {
		file.Close()
		return nil, changed(f, nil)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// decided reports whether st, of fd, is the file f names: the same device
// and inode; or anything on a file system the sandbox made for itself
// (private); or, in the fresh layer of a guarded workspace (freshLayer),
// the same inode on the workspace's overlay (or its root). There the
// device is the overlay's, another in each sandbox, and the inode the host
// file's: the tool is the sandbox's only command, so that nothing is in
// the layer yet and every file it sees is the host's, which no other has
// the inode of.
func decided(st *unix.Stat_t, f File, fd int) bool {
	switch {
	case uint64(st.Dev) == f.Dev && st.Ino == f.Ino, private(fd):
		return true
	}
	var fs unix.Statfs_t
	if !freshLayer || unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return false
	}
	if st.Ino == f.Ino {
		return true
	}
	// The overlay's root, the workspace's, has the inode of the layer's
	// upper directory, another in each sandbox; reached by its path, it is
	// what the path named, in any sandbox of the workspace.
	var stx unix.Statx_t
	return st.Mode&unix.S_IFMT == unix.S_IFDIR &&
		unix.Statx(fd, "", unix.AT_EMPTY_PATH, 0, &stx) == nil &&
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// freshLayer is set (FreshLayerArg) when the tool runs alone in a new
// sandbox of a guarded workspace.
var freshLayer bool

// private reports whether fd is on a file system the sandbox made for
// itself (a tmpfs of cordon's, mounted with the source "none": the root,
// home, /tmp, /dev/shm), which every sandbox makes anew: what is there was
// made in this sandbox, so its identity cannot match the one the resolving
// sandbox saw, and nothing of the agent's persists there to be swapped in.
// Anything else, a bind of the host's in particular, is compared.
func private(fd int) bool {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	id := strconv.FormatUint(stx.Mnt_id, 10)
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 10 || fields[0] != id {
			continue
		}
		i := len(fields) - 3 // FSTYPE SOURCE OPTIONS, after the "-"
		return fields[i-1] == "-" && fields[i] == "tmpfs" && fields[i+1] == "none" && fields[3] == "/"
	}
	return false
}

// changed is the error of a path that no longer names the decided file.
func changed(f File, err error) error {
	if err != nil && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "open", Path: f.Path, Err: err}
	}
	return fmt.Errorf("%s is no longer the file the call was decided on (a name on its path was changed since); nothing was done", f.Path)
}

// ExpectArg is how the caller of a built-in tool passes, on its command
// line, the file each path argument was decided on: ARG=DEV:INO:STATE,
// STATE "file" (an existing file or directory) or "new" (a file to create;
// DEV:INO is its parent's) and the resolved path on stdin's arguments.
func ExpectArg(arg string, f File) string {
	state := "new"
	if f.Exists {
		state = "file"
	}
	return fmt.Sprintf("%s=%d:%d:%s", arg, f.Dev, f.Ino, state)
}

// parseExpect reads ExpectArg's form.
func parseExpect(s string) (arg string, f File, err error) {
	arg, v, ok := strings.Cut(s, "=")
	parts := strings.Split(v, ":")
	if !ok || arg == "" || len(parts) != 3 || (parts[2] != "file" && parts[2] != "new") {
		return "", File{}, fmt.Errorf("%q is not ARG=DEV:INO:file|new", s)
	}
	if f.Dev, err = strconv.ParseUint(parts[0], 10, 64); err == nil {
		f.Ino, err = strconv.ParseUint(parts[1], 10, 64)
	}
	if err != nil {
		return "", File{}, fmt.Errorf("%q: %v", s, err)
	}
	f.Exists = parts[2] == "file"
	return arg, f, nil
}

// ResolveArg is the hidden mode of Arg that resolves paths in the
// sandbox's view: `cordon __tool resolve` reads {"paths": [...]} and
// writes {"workspace": DIR, "files": [...]}, a File or an error for each.
const ResolveArg = "resolve"

// MaxResolve is how many paths one resolution takes.
const MaxResolve = 64

// maxReachIDs is how many identities one resolution looks for: as many as
// the gateway keeps labels of.
const maxReachIDs = 4096

// Resolution is the answer of the resolve mode: the working directory (the
// workspace inside the view) and each path's file or why it has none.
type Resolution struct {
	Workspace string     `json:"workspace"`
	Files     []Resolved `json:"files"`
	// Reached are the indexes of the rules asked for (reach) that name a
	// file of the workspace; ReachComplete says the whole workspace was
	// looked at (when not, the rules not found count as found).
	Reached       []int `json:"reached,omitempty"`
	ReachComplete bool  `json:"reach_complete,omitempty"`
	// ReachedIDs are the indexes of the identities asked for that a file
	// of the workspace has; Matched the files the rules named.
	ReachedIDs   []int  `json:"reached_ids,omitempty"`
	ReachedPaths []int  `json:"reached_paths,omitempty"`
	Matched      []File `json:"matched,omitempty"`
	// Changed are the files asked for (changed) changed since the time
	// given; ChangedComplete says every entry was looked at.
	Changed         []File `json:"changed,omitempty"`
	ChangedComplete bool   `json:"changed_complete,omitempty"`
}

// Resolved is one path's resolution.
type Resolved struct {
	File
	Error string `json:"error,omitempty"`
}

// ResolveMain is the resolve mode: exit status 0, or 2 on bad input.
func ResolveMain(stdin io.Reader, stdout io.Writer) int {
	var in struct {
		Paths []string `json:"paths"`
		// Reach are label rules: the answer says which of them name a
		// file of the workspace (see reach).
		Reach []pathglob.Rule `json:"reach,omitempty"`
		// ReachIDs are identities of labelled files to look for, under
		// the workspace and ReachRoots; ReachPaths labelled paths.
		ReachIDs   []ID     `json:"reach_ids,omitempty"`
		ReachRoots []string `json:"reach_roots,omitempty"`
		ReachPaths []string `json:"reach_paths,omitempty"`
		// Changed asks for the files under Dirs changed since Since
		// (Unix nanoseconds; see changedSince).
		Changed *struct {
			Dirs  []string `json:"dirs"`
			Since int64    `json:"since"`
			Max   int      `json:"max"`
		} `json:"changed,omitempty"`
	}
	data, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err == nil {
		err = DecodeStrict(data, &in)
	}
	if err == nil && len(in.Paths) > MaxResolve {
		err = fmt.Errorf("%d paths, at most %d", len(in.Paths), MaxResolve)
	}
	if err == nil && len(in.Reach) > MaxResolve {
		err = fmt.Errorf("%d rules, at most %d", len(in.Reach), MaxResolve)
	}
	if err == nil && (len(in.ReachIDs) > maxReachIDs || len(in.ReachPaths) > maxReachIDs) {
		err = fmt.Errorf("%d identities, at most %d", len(in.ReachIDs), maxReachIDs)
	}
	if err != nil {
		fmt.Fprintf(stdout, "{\"error\":%q}\n", "resolve: "+err.Error())
		return 2
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stdout, "{\"error\":%q}\n", "resolve: "+err.Error())
		return 2
	}
	out := Resolution{Workspace: wd, Files: ResolvePaths(in.Paths, "/")}
	if len(in.Reach) > 0 || len(in.ReachIDs) > 0 || len(in.ReachPaths) > 0 {
		var roots []string
		for _, r := range in.ReachRoots {
			if filepath.IsAbs(r) && len(roots) < MaxResolve {
				roots = append(roots, filepath.Clean(r))
			}
		}
		out.Reached, out.ReachedIDs, out.Matched, out.ReachComplete = reachAll(wd, roots, in.Reach, in.ReachIDs)
		out.ReachedPaths = present(in.ReachPaths)
	}
	if c := in.Changed; c != nil && len(c.Dirs) <= MaxResolve {
		var dirs []string
		for _, d := range c.Dirs {
			if !filepath.IsAbs(d) {
				d = filepath.Join(wd, d)
			}
			dirs = append(dirs, filepath.Clean(d))
		}
		out.Changed, out.ChangedComplete = changedSince(dirs, time.Unix(0, c.Since), min(max(c.Max, 1), MaxChangedFiles))
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
	return 0
}
