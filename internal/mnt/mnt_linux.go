// Package mnt opens mount sources and places mounts with the file-descriptor
// based mount API (open_tree, mount_setattr, move_mount, fsopen), so that no
// path is resolved twice and no symlink is followed on the way.
package mnt

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind is what a mount source is.
type Kind int

// Kinds of mount sources.
const (
	Dir Kind = iota
	File
	Symlink
)

// Source is a host path opened for binding: a detached mount (Tree) or, for
// a symlink, the link's text, which is reproduced instead of followed.
type Source struct {
	Path string
	Kind Kind
	Link string // for Symlink
	Tree *os.File
}

// Close releases the detached mount, if any.
func (s *Source) Close() {
	if s.Tree != nil {
		s.Tree.Close()
	}
}

// ErrSymlink reports a symlink where none may be followed.
var ErrSymlink = errors.New("path contains a symlink; give the path it resolves to")

// Open resolves p without following any symlink and clones what is there as
// a detached mount with attrs (MOUNT_ATTR_*) set recursively. A symlink as the
// last component is returned as a Symlink source when allowSymlink is true.
func Open(p string, attrs uint64, allowSymlink bool) (*Source, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, &os.PathError{Op: "open", Path: p, Err: ErrSymlink}
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	src := &Source{Path: p}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		if !allowSymlink {
			return nil, &os.PathError{Op: "open", Path: p, Err: ErrSymlink}
		}
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return nil, &os.PathError{Op: "readlink", Path: p, Err: err}
		}
		src.Kind, src.Link = Symlink, string(buf[:n])
		return src, nil
	case unix.S_IFDIR:
		src.Kind = Dir
	default:
		src.Kind = File
	}
	tree, err := Clone(fd, "", attrs)
	if err != nil {
		return nil, &os.PathError{Op: "clone mount", Path: p, Err: err}
	}
	src.Tree = tree
	return src, nil
}

// Clone makes a detached recursive copy of the mount at dirfd/name with
// attrs set on every mount in it.
func Clone(dirfd int, name string, attrs uint64) (*os.File, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_RECURSIVE)
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	} else {
		flags |= unix.AT_SYMLINK_NOFOLLOW
	}
	tfd, err := unix.OpenTree(dirfd, name, flags)
	if err != nil {
		return nil, fmt.Errorf("open_tree: %w", err)
	}
	tree := os.NewFile(uintptr(tfd), "tree:"+name)
	if attrs != 0 {
		if err := SetAttr(tree, attrs, true); err != nil {
			tree.Close()
			return nil, err
		}
	}
	return tree, nil
}

// SetAttr sets MOUNT_ATTR_* flags on the mount f refers to, and on every
// mount beneath it when recursive.
func SetAttr(f *os.File, attrs uint64, recursive bool) error {
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(int(f.Fd()), "", flags, &unix.MountAttr{Attr_set: attrs}); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	return nil
}

// Idmap makes the detached tree present ids through the user namespace
// usernsFD (an idmapped mount).
func Idmap(tree *os.File, usernsFD int) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(usernsFD)}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("idmapping mount: %w", err)
	}
	return nil
}

// Attach places the detached mount tree on the directory or file target.
func Attach(tree *os.File, target *os.File) error {
	err := unix.MoveMount(int(tree.Fd()), "", int(target.Fd()), "",
		unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// New creates a detached mount of a fresh file system of type fstype with
// string options and mount attributes.
func New(fstype string, opts map[string]string, attrs uint64) (*os.File, error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fsfd)
	for k, v := range opts {
		if v == "" {
			err = unix.FsconfigSetFlag(fsfd, k)
		} else {
			err = unix.FsconfigSetString(fsfd, k, v)
		}
		if err != nil {
			return nil, fmt.Errorf("%s option %s=%s: %w", fstype, k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("creating %s: %w", fstype, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, int(attrs))
	if err != nil {
		return nil, fmt.Errorf("fsmount %s: %w", fstype, err)
	}
	return os.NewFile(uintptr(mfd), fstype), nil
}

// Walk opens the path rel beneath root one component at a time, never
// following a symlink and never leaving root. A missing directory is created
// (mode 0755) when create reports that its parent may receive new entries.
// The result is an O_PATH descriptor.
func Walk(root *os.File, rel string, create func(parent *os.File) bool) (*os.File, error) {
	rel = strings.Trim(path.Clean("/"+rel), "/")
	cur, err := reopen(root)
	if err != nil {
		return nil, err
	}
	if rel == "" {
		return cur, nil
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := openBeneath(cur, name)
		if errors.Is(err, unix.ENOENT) && create != nil && create(cur) {
			if err = unix.Mkdirat(int(cur.Fd()), name, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openBeneath(cur, name)
			}
		}
		cur.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cur = next
	}
	return cur, nil
}

func openBeneath(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat2(int(dir.Fd()), name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, ErrSymlink
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		f.Close()
		return nil, ErrSymlink
	}
	return f, nil
}

func reopen(f *os.File) (*os.File, error) {
	fd, err := unix.Openat(int(f.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// MountID returns the id of the mount f is on.
func MountID(f *os.File) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("statx: %w", err)
	}
	return stx.Mnt_id, nil
}
