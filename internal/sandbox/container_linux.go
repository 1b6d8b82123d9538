package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/container"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// idmapError is a writable bind that cordon, as root, could not idmap to
// the sandbox user: its file system does not support idmapped mounts
// (overlayfs, the root of every container; NFS) or cordon is not
// privileged over it (a volume of the host's disk seen from a container in
// a user namespace).
type idmapError struct {
	path     string
	fsType   string
	uid, gid uint32 // its owner
	to       int    // the sandbox user's host uid
	err      error
	// review: the workspace is reviewed, so the host's tree is not
	// written while the sandbox runs, whoever the sandbox user is.
	review bool
}

func (e *idmapError) Error() string {
	return fmt.Sprintf("idmapping %s (%s): %v", e.path, e.fsType, e.err)
}

func (e *idmapError) Unwrap() error { return e.err }

// refusal names the missing piece and what gives it back: a file system
// that can be idmapped, an owner that is not root, or the user's word that
// the sandbox user may be the owner.
func (e *idmapError) refusal() error {
	fix := container.Fixes(container.NeedIdmap, e.path)
	who := fmt.Sprintf("uid %d", e.uid)
	if e.uid == 0 {
		who = "host root"
	}
	degraded := fmt.Sprintf("--allow-degraded=%s: the sandbox user maps to its owner, %s (what only that user may read or write in the view is then open to the sandbox)", LayerIdmap, who)
	if e.review {
		degraded += "; the workspace is reviewed, so even then nothing is written to it while the sandbox runs"
	}
	return fmt.Errorf("%s is on %s, which cannot be idmapped here (%v), and uid %d owns it: "+
		"the sandbox user (uid %d on the host) cannot write it without being %s, so cordon refuses. Any of these gives it back:\n"+
		"  - a volume or a tmpfs there: Docker: %s; Podman: %s; Kubernetes: %s\n"+
		"  - an owner that is not root: chown -R 1000:1000 %s (the sandbox user then maps to it), or run cordon as that user: Docker: %s; Podman: %s; Kubernetes: %s\n"+
		"  - %s",
		e.path, e.fsType, e.err, e.uid, e.to, who,
		fix.Docker, fix.Podman, fix.Kubernetes,
		e.path, container.UserFlags.Docker, container.UserFlags.Podman, container.UserFlags.Kubernetes,
		degraded)
}

// fsTypeOf names the file system of an open file, for messages.
func fsTypeOf(f *os.File) string {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return "an unknown file system"
	}
	return container.FSName(int64(st.Type))
}

// IdmapCheck reports whether a root cordon could run with dir as the
// workspace with every layer: nil when it need not idmap dir (rootless, or
// dir belongs to a user other than root) or when dir can be idmapped, the
// refusal cordon run would give otherwise.
func IdmapCheck(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	spec := &Spec{Spec: wire.Spec{Workdir: dir, Mounts: []Mount{{Source: dir, Target: dir, Writable: true}}}}
	files, err := openTrees(spec, rootIDs(spec), false)
	for _, f := range files {
		f.Close()
	}
	var unmapped *idmapError
	if errors.As(err, &unmapped) {
		return unmapped.refusal()
	}
	return err
}

// inContainer is where cordon looks for a container; tests change it.
var inContainer = func() container.Info { return container.Detect("/") }

// withContainerHint adds to a setup error, when cordon runs in a container
// and the error is one a runtime's defaults cause, the piece missing and
// the flags of each runtime that give it.
func withContainerHint(err error) error {
	var se *SetupError
	if !errors.As(err, &se) {
		return err
	}
	need := containerNeed(se)
	if need == "" {
		return err
	}
	c := inContainer()
	if !c.In() {
		return err
	}
	if need == container.NeedMount && c.AppArmor == "" {
		return err
	}
	fix := container.Fixes(need, "")
	return &SetupError{Stage: se.Stage, Err: fmt.Errorf("%w\nin this container (%s), cordon lacks %s; give it with:\n%s", se.Err, c.Runtime, need, strings.TrimRight(fix.Join("  "), "\n"))}
}

// containerNeed names what a setup error shows missing, "" when it is
// none of the things a container runtime withholds.
func containerNeed(se *SetupError) container.Need {
	msg := se.Err.Error()
	eperm := errors.Is(se.Err, unix.EPERM) || strings.Contains(msg, "operation not permitted")
	switch {
	case se.Stage == LayerCgroup && errors.Is(se.Err, cgroup.ErrNotDelegated):
		return container.NeedCgroup
	case strings.Contains(msg, "open_tree") && eperm && os.Geteuid() == 0:
		return container.NeedRootMounts
	case se.Stage == "creating the sandbox namespaces" && eperm:
		return container.NeedUserns
	case strings.Contains(msg, "proc") && strings.Contains(se.Stage, "building root") && eperm:
		return container.NeedProc
	case (se.Stage == "setting hostname" || se.Stage == "building root") && eperm:
		return container.NeedUserns
	case se.Stage == "building root" && (errors.Is(se.Err, unix.EACCES) || strings.Contains(msg, "permission denied")):
		return container.NeedMount
	}
	return ""
}
