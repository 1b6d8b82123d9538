// Package landlock restricts file access inside the sandbox to the view cordon
// built, with the Landlock LSM: read and execute beneath the new root, write
// only where the profile made a path writable, device I/O only on the
// device nodes cordon placed, and no signals or abstract unix sockets across
// the sandbox's boundary. It is defence in depth behind the mount namespace:
// a file reached through a descriptor or magic link from outside the view is
// not beneath any rule, so it is refused.
package landlock

import (
	"fmt"

	ll "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// View is what the sandbox may touch, as paths inside the sandbox.
type View struct {
	WritableDirs  []string
	WritableFiles []string
	// Devices are device nodes or directories of them (/dev/pts) that may
	// be read, written and sent ioctls.
	Devices []string
	// Refer grants, in test builds only, every right with REFER beneath
	// the root, as if the rule for writable parts covered the whole
	// view: the mistake the fs-refer probe looks for.
	Refer bool
}

// MinABI is the Landlock ABI cordon needs for the whole view: file access
// (1), renames across directories (2), truncation (3), device ioctls (5) and
// IPC scoping (6). With less, cordon runs only when the user allows it.
const MinABI = 6

// ABI returns the Landlock ABI version the kernel offers, 0 when Landlock is
// unavailable.
func ABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Restrict confines every thread of the calling process, and everything it
// starts, to v, with every right the kernel's ABI can enforce (the caller
// decides beforehand whether an ABI below MinABI is acceptable). It fails
// when the kernel offers no Landlock at all.
func Restrict(v View) (abi int, err error) {
	abi = ABI()
	if abi < 1 {
		return 0, fmt.Errorf("landlock is not available in this kernel")
	}
	cfg := ll.V11.BestEffort()
	// Network reach is decided by the network namespace and the egress
	// proxy; Landlock's port rules would only break loopback inside.
	cfg.HandledAccessNet = 0
	const read = ll.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir)
	const device = ll.AccessFSSet(llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSIoctlDev | llsys.AccessFSTruncate)
	rootRule := ll.PathAccess(read, "/")
	if v.Refer { // test builds only
		rootRule = ll.RWDirs("/").WithRefer()
	}
	rules := []ll.Rule{
		rootRule,
		ll.PathAccess(ll.AccessFSSet(llsys.AccessFSWriteFile), "/proc"),
		ll.PathAccess(device, v.Devices...).IgnoreIfMissing(),
	}
	if len(v.WritableDirs) > 0 {
		// Moving and linking files between directories (REFER) is
		// allowed where both sides are writable: rename(2) and link(2)
		// across directories of the workspace are what git, editors and
		// package managers do. Landlock refuses it whenever the file would
		// gain rights, so nothing read-only moves into a writable part.
		// On ABI 1, where REFER cannot be granted, asking for it would
		// drop every rule, so such kernels keep the EXDEV of old.
		rw := ll.RWDirs(v.WritableDirs...)
		if abi >= 2 {
			rw = rw.WithRefer()
		}
		rules = append(rules, rw)
	}
	if len(v.WritableFiles) > 0 {
		rules = append(rules, ll.RWFiles(v.WritableFiles...))
	}
	if err := cfg.Restrict(rules...); err != nil {
		return abi, fmt.Errorf("landlock: %w", err)
	}
	return abi, nil
}
