package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/mnt"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Entries of /proc that are replaced by an empty file (a read-only /dev/null,
// which reads empty) or directory, or made read-only (THREATS.md 9 and 10).
// sysrq-trigger is made read-only, not replaced: /dev/null in its place
// would open for writing, harmlessly but not refused.
var (
	procMaskFiles = []string{"kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats",
		"kallsyms", "kmsg", "config.gz", "kpagecount", "kpageflags", "kpagecgroup",
		"vmallocinfo", "pagetypeinfo", "slabinfo"}
	procMaskDirs = []string{"acpi", "asound", "scsi", "driver", "tty/driver"}
	procReadOnly = []string{"sys", "bus", "fs", "irq", "sysrq-trigger"}
)

// Attributes of the special file systems.
const (
	roAttrs     = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	maskAttrs   = roAttrs | unix.MOUNT_ATTR_NOEXEC
	devAttrs    = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC
	scratchAttr = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
)

// rootfs builds the sandbox's root file system on a fresh tmpfs.
type rootfs struct {
	spec  *wire.Spec
	root  *os.File // the new root's mount
	ours  map[uint64]bool
	notes []string
	// layer is the detached mount of a guarded workspace's layer, opened
	// with the other host paths.
	layer *os.File
}

// source is a bind ready to be placed.
type source struct {
	m   wire.Mount
	src *mnt.Source
}

// build makes the new root and pivots into it. Host paths are opened before
// anything is mounted over them.
func (r *rootfs) build() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	srcs, err := r.openSources()
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range srcs {
			s.src.Close()
		}
	}()
	if r.layer, err = openLayer(r.spec.Layer); err != nil {
		return err
	}
	defer func() {
		if r.layer != nil {
			r.layer.Close()
		}
	}()

	root, err := mnt.New("tmpfs", map[string]string{"mode": "0755", "size": "4m"}, scratchAttr)
	if err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	r.root = root
	// Any directory of the host will do as the place to assemble the root:
	// it is only visible in this mount namespace, and only until pivot_root.
	base, err := os.OpenFile(assembly, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening assembly point: %w", err)
	}
	defer base.Close()
	if err := mnt.Attach(root, base); err != nil {
		return fmt.Errorf("attaching root tmpfs: %w", err)
	}
	if err := r.own(root); err != nil {
		return err
	}

	proc, err := r.mountFS("proc", "proc", nil, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer proc.Close()
	if !r.spec.Weaken.UsernsLimit {
		r.limitUserNamespaces(proc)
	}
	if !r.spec.Weaken.UserLimits { // test builds only: the owner's whole quotas
		r.notes = append(r.notes, limitUserQuotas(proc)...)
	}

	dev, err := r.mountFS("dev", "tmpfs", map[string]string{"mode": "0755", "size": "64k"}, devAttrs)
	if err != nil {
		return err
	}
	defer dev.Close()
	size := strconv.FormatInt(r.spec.TmpSize, 10)
	for _, fs := range []struct{ dir, fstype, mode string }{
		{"dev/pts", "devpts", ""},
		{"dev/shm", "tmpfs", "1777"},
		{"tmp", "tmpfs", "1777"},
		{strings.TrimPrefix(r.spec.Home, "/"), "tmpfs", "0700"},
	} {
		opts := map[string]string{"mode": fs.mode, "size": size}
		attrs := uint64(scratchAttr)
		if fs.fstype == "devpts" {
			opts = map[string]string{"newinstance": "", "ptmxmode": "0666", "mode": "0620"}
			attrs = devAttrs
		}
		f, err := r.mountFS(fs.dir, fs.fstype, opts, attrs)
		if err != nil {
			return err
		}
		f.Close()
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := unix.Symlinkat(target, int(dev.Fd()), name); err != nil {
			return fmt.Errorf("/dev/%s: %w", name, err)
		}
	}

	for _, s := range srcs {
		if err := r.place(s); err != nil {
			return fmt.Errorf("mounting %s on %s: %w", s.m.Source, s.m.Target, err)
		}
	}
	for _, s := range srcs {
		if err := r.protect(s.m); err != nil {
			return fmt.Errorf("protecting %s in %s: %w", s.m.Target, s.m.Source, err)
		}
	}
	for _, s := range srcs {
		if err := r.mask(s.m); err != nil {
			return fmt.Errorf("masking credentials in %s: %w", s.m.Target, err)
		}
	}
	if !r.spec.Weaken.ProcMasks {
		if err := r.maskProc(proc); err != nil {
			return err
		}
	}
	if err := r.writeEtc(); err != nil {
		return err
	}
	// The root and /dev are complete: nothing inside may add to them.
	if err := mnt.SetAttr(dev, unix.MOUNT_ATTR_RDONLY|devAttrs, false); err != nil {
		return fmt.Errorf("making /dev read-only: %w", err)
	}
	if r.spec.Weaken.Refer {
		// test builds only: the root stays writable
	} else if err := mnt.SetAttr(root, unix.MOUNT_ATTR_RDONLY|scratchAttr, false); err != nil {
		return fmt.Errorf("making / read-only: %w", err)
	}
	return r.pivot()
}

// openSources opens every bind's source: a detached mount prepared by the
// host side, or one opened here.
func (r *rootfs) openSources() ([]source, error) {
	var out []source
	for _, m := range r.spec.Mounts {
		switch {
		case m.Missing:
			continue
		case m.Link != "":
			out = append(out, source{m, &mnt.Source{Path: m.Source, Kind: mnt.Symlink, Link: m.Link}})
		case m.Tree > 0:
			tree := os.NewFile(uintptr(m.Tree), m.Source)
			kind, err := kindOf(tree)
			if err != nil {
				return nil, fmt.Errorf("mount %s: %w", m.Source, err)
			}
			out = append(out, source{m, &mnt.Source{Path: m.Source, Kind: kind, Tree: tree}})
		default:
			s, err := mnt.Open(m.Source, m.Attrs(), !m.Writable)
			if err != nil {
				if m.Optional && errors.Is(err, unix.ENOENT) {
					continue
				}
				return nil, err
			}
			out = append(out, source{m, s})
		}
	}
	// Shallow targets first, so that nested ones land on top of their parents.
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].m.Target) < depth(out[j].m.Target) })
	return out, nil
}

func depth(p string) int { return strings.Count(path.Clean(p), "/") }

func kindOf(f *os.File) (mnt.Kind, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return mnt.Dir, nil
	}
	return mnt.File, nil
}

// own records that the mount f is on was made by cordon, so that directories
// may be created on it.
func (r *rootfs) own(f *os.File) error {
	id, err := mnt.MountID(f)
	if err != nil {
		return err
	}
	if r.ours == nil {
		r.ours = map[uint64]bool{}
	}
	r.ours[id] = true
	return nil
}

func (r *rootfs) creatable(parent *os.File) bool {
	id, err := mnt.MountID(parent)
	return err == nil && r.ours[id]
}

// mountFS mounts a new file system on dir (relative to the root), creating
// dir, and returns the new mount.
func (r *rootfs) mountFS(dir, fstype string, opts map[string]string, attrs uint64) (*os.File, error) {
	target, err := mnt.Walk(r.root, dir, r.creatable)
	if err != nil {
		return nil, fmt.Errorf("/%s: %w", dir, err)
	}
	defer target.Close()
	m, err := mnt.New(fstype, opts, attrs)
	if err != nil {
		return nil, fmt.Errorf("/%s: %w", dir, err)
	}
	if err := mnt.Attach(m, target); err != nil {
		m.Close()
		return nil, fmt.Errorf("/%s: %w", dir, err)
	}
	if err := r.own(m); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// place puts one bind at its target, creating the target on cordon's own
// file systems only and never through a symlink.
func (r *rootfs) place(s source) error {
	rel := strings.TrimPrefix(s.m.Target, "/")
	parent, err := mnt.Walk(r.root, path.Dir(rel), r.creatable)
	if err != nil {
		return err
	}
	defer parent.Close()
	name := path.Base(rel)
	switch s.src.Kind {
	case mnt.Symlink:
		if !r.creatable(parent) {
			return fmt.Errorf("cannot create a symlink inside a bind mount")
		}
		return unix.Symlinkat(s.src.Link, int(parent.Fd()), name)
	case mnt.File:
		if r.creatable(parent) {
			fd, err := unix.Openat(int(parent.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return err
			}
			if err == nil {
				unix.Close(fd)
			}
		}
	}
	target, err := mnt.Walk(parent, name, r.creatable)
	if err != nil {
		return err
	}
	defer target.Close()
	if k, err := kindOf(target); err != nil || (k == mnt.Dir) != (s.src.Kind == mnt.Dir) {
		return fmt.Errorf("target exists with another file type")
	}
	if s.m.Review {
		return r.placeReview(s, target)
	}
	return mnt.Attach(s.src.Tree, target)
}

// protect binds each protected path of a writable bind onto itself, as
// the bind shows it (with its idmapping): read-only, or writable only to
// pin it in place, since a mount point can be neither renamed nor removed.
func (r *rootfs) protect(m wire.Mount) error {
	for _, e := range m.Protect {
		at := path.Join(strings.TrimPrefix(m.Target, "/"), e.Rel)
		target, err := mnt.Walk(r.root, at, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Rel, err)
		}
		attrs := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if e.ReadOnly {
			attrs |= unix.MOUNT_ATTR_RDONLY
		}
		tree, err := mnt.Clone(int(target.Fd()), "", attrs)
		if err == nil {
			err = mnt.Attach(tree, target)
			tree.Close()
		}
		target.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Rel, err)
		}
	}
	return nil
}

// mask covers each masked path of a bind (credentials in a toolchain's
// prefix): a directory with an empty read-only tmpfs, anything else with
// /dev/null bound read-only, which reads empty. A path gone since the host
// side found it shows nothing to cover; one that is now a symbolic link
// fails the run, since a link cannot be covered and may lead to what was
// masked.
func (r *rootfs) mask(m wire.Mount) error {
	for _, rel := range m.Mask {
		at := path.Join(strings.TrimPrefix(m.Target, "/"), rel)
		target, err := mnt.Walk(r.root, at, nil)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		kind, err := kindOf(target)
		var tree *os.File
		switch {
		case err != nil:
		case kind == mnt.Dir:
			tree, err = mnt.New("tmpfs", map[string]string{"mode": "0555", "size": "4k"}, maskAttrs)
		default:
			tree, err = mnt.Clone(int(r.root.Fd()), "dev/null", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
		}
		if err == nil {
			err = mnt.Attach(tree, target)
			tree.Close()
		}
		target.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	return nil
}

// limitUserNamespaces sets this user namespace's limit on nested user
// namespaces to zero, which holds even for clone3, whose flags seccomp cannot
// see. A kernel that refuses is noted, not fatal: seccomp still denies the
// calls that create namespaces.
func (r *rootfs) limitUserNamespaces(proc *os.File) {
	fd, err := unix.Openat(int(proc.Fd()), "sys/user/max_user_namespaces", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = unix.Write(fd, []byte("0\n"))
		unix.Close(fd)
	}
	if err != nil {
		r.notes = append(r.notes, "nested user namespaces not limited by sysctl: "+err.Error())
	}
}

// maskProc hides and write-protects the sensitive parts of /proc.
func (r *rootfs) maskProc(proc *os.File) error {
	for _, name := range procReadOnly {
		if err := r.overmount(proc, name, func() (*os.File, error) {
			return mnt.Clone(int(proc.Fd()), name, maskAttrs)
		}); err != nil {
			return fmt.Errorf("/proc/%s read-only: %w", name, err)
		}
	}
	for _, name := range procMaskFiles {
		if err := r.overmount(proc, name, func() (*os.File, error) {
			return mnt.Clone(int(r.root.Fd()), "dev/null", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
		}); err != nil {
			return fmt.Errorf("masking /proc/%s: %w", name, err)
		}
	}
	for _, name := range procMaskDirs {
		if err := r.overmount(proc, name, func() (*os.File, error) {
			return mnt.New("tmpfs", map[string]string{"mode": "0555", "size": "4k"}, maskAttrs)
		}); err != nil {
			return fmt.Errorf("masking /proc/%s: %w", name, err)
		}
	}
	return nil
}

// overmount mounts what make returns over proc/name, if name exists.
func (r *rootfs) overmount(proc *os.File, name string, make func() (*os.File, error)) error {
	target, err := mnt.Walk(proc, name, nil)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer target.Close()
	m, err := make()
	if err != nil {
		return err
	}
	defer m.Close()
	return mnt.Attach(m, target)
}

// writeEtc writes the synthetic account and host files.
func (r *rootfs) writeEtc() error {
	etc, err := mnt.Walk(r.root, "etc", r.creatable)
	if err != nil {
		return fmt.Errorf("/etc: %w", err)
	}
	defer etc.Close()
	if !r.creatable(etc) {
		return fmt.Errorf("/etc is a bind mount; bind the files programs need instead")
	}
	s := r.spec
	files := map[string]string{
		"passwd":   fmt.Sprintf("%s:x:%d:%d:%s:%s:/bin/sh\n", s.UserName, s.UID, s.GID, s.UserName, s.Home),
		"group":    fmt.Sprintf("%s:x:%d:\n", s.UserName, s.GID),
		"hostname": s.Hostname + "\n",
		"hosts":    fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", s.Hostname),
	}
	if s.GitIgnore != "" {
		files[strings.TrimPrefix(wire.GitIgnoreFile, "/etc/")] = s.GitIgnore
	}
	if len(s.Placeholders) > 0 {
		files[strings.TrimPrefix(wire.PlaceholdersFile, "/etc/")] = wire.PlaceholdersText(s.Placeholders)
	}
	if s.Transparent {
		files["resolv.conf"] = "nameserver " + strings.TrimSuffix(wire.DNSAddr, ":53") + "\n"
	}
	for name, content := range files {
		fd, err := unix.Openat(int(etc.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("/etc/%s: %w", name, err)
		}
		_, err = unix.Write(fd, []byte(content))
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("/etc/%s: %w", name, err)
		}
	}
	return nil
}

// pivot makes the new root the process's root and detaches the old one.
func (r *rootfs) pivot() error {
	if err := unix.Fchdir(int(r.root.Fd())); err != nil {
		return fmt.Errorf("entering new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	// The old root is now stacked on top of the new one at "/": detach it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	r.root.Close()
	return nil
}
