package container

import (
	"fmt"
	"strings"
)

// Need is something cordon needs from the kernel that a container runtime
// may withhold.
type Need string

// What cordon needs in a container.
const (
	// NeedUserns: creating a user namespace, and the others with it, and
	// acting in them (mount, sethostname). Docker's and Podman's default
	// seccomp profiles allow those system calls only to a container with
	// CAP_SYS_ADMIN.
	NeedUserns Need = "userns"
	// NeedRootMounts: cordon as root opens the view's mounts (open_tree)
	// before it enters its namespaces, which takes CAP_SYS_ADMIN where it
	// runs; runtimes do not grant it by default. Rootless, cordon mounts
	// inside its own namespaces instead.
	NeedRootMounts Need = "root-mounts"
	// NeedMount: mounting in those namespaces; AppArmor's docker-default
	// profile denies every mount.
	NeedMount Need = "mount"
	// NeedProc: mounting a fresh /proc, which the kernel refuses while
	// parts of the container's /proc are covered (masked paths).
	NeedProc Need = "proc"
	// NeedLandlock: the Landlock system calls, which older seccomp
	// profiles of the runtimes refuse.
	NeedLandlock Need = "landlock"
	// NeedSeccomp: installing seccomp filters with user notification.
	NeedSeccomp Need = "seccomp"
	// NeedCgroup: a writable cgroup of cordon's own, for the sandbox's
	// limits; runtimes mount /sys/fs/cgroup read-only.
	NeedCgroup Need = "cgroup"
	// NeedIdmap: an idmapped mount of a root-owned workspace, which
	// overlayfs (a container's root file system) cannot give.
	NeedIdmap Need = "idmap"
)

// Needs lists every Need in the order doctor reports them.
var Needs = []Need{NeedUserns, NeedRootMounts, NeedMount, NeedProc, NeedLandlock, NeedSeccomp, NeedCgroup, NeedIdmap}

// Fix is what to give each runtime for a Need.
type Fix struct {
	Docker     string `json:"docker"`
	Podman     string `json:"podman"`
	Kubernetes string `json:"kubernetes"`
}

// UserFlags run a container's command as a user that is not root.
var UserFlags = Fix{
	Docker:     "docker run --user 1000:1000",
	Podman:     "podman run --user 1000:1000",
	Kubernetes: "securityContext.runAsUser: 1000 and runAsGroup: 1000",
}

// Fixes returns what gives cordon need in each runtime; path is the
// directory concerned (the workspace, for NeedIdmap), "/work" when "".
func Fixes(need Need, path string) Fix {
	if path == "" {
		path = "/work"
	}
	switch need {
	case NeedUserns:
		return Fix{
			Docker:     "docker run --security-opt seccomp=unconfined (or a seccomp profile that allows unshare, clone and setns with namespace flags)",
			Podman:     "podman run --security-opt seccomp=unconfined",
			Kubernetes: "securityContext.seccompProfile.type: Unconfined (or Localhost, with a profile that allows them)",
		}
	case NeedRootMounts:
		return Fix{
			Docker:     "docker run --cap-add SYS_ADMIN, or run cordon as a user that is not root (docker run --user 1000:1000)",
			Podman:     "podman run --cap-add SYS_ADMIN, or run cordon as a user that is not root (podman run --user 1000:1000)",
			Kubernetes: "securityContext.capabilities.add: [SYS_ADMIN], or run cordon as a user that is not root (securityContext.runAsUser: 1000)",
		}
	case NeedMount:
		return Fix{
			Docker:     "docker run --security-opt apparmor=unconfined",
			Podman:     "podman run --security-opt apparmor=unconfined",
			Kubernetes: "securityContext.appArmorProfile.type: Unconfined",
		}
	case NeedProc:
		return Fix{
			Docker:     "docker run --security-opt systempaths=unconfined",
			Podman:     "podman run --security-opt unmask=/proc/*",
			Kubernetes: "securityContext.procMount: Unmasked (with spec.hostUsers: false)",
		}
	case NeedLandlock, NeedSeccomp:
		return Fix{
			Docker:     "docker run --security-opt seccomp=unconfined, on a host kernel that has it",
			Podman:     "podman run --security-opt seccomp=unconfined, on a host kernel that has it",
			Kubernetes: "securityContext.seccompProfile.type: Unconfined, on nodes whose kernel has it",
		}
	case NeedCgroup:
		return Fix{
			Docker:     "no flag short of --privileged makes /sys/fs/cgroup writable: run cordon with --allow-degraded=cgroup and bound the container itself (docker run --memory, --cpus, --pids-limit)",
			Podman:     "run cordon with --allow-degraded=cgroup and bound the container itself (podman run --memory, --cpus, --pids-limit); on cgroup v2, podman run --security-opt unmask=/sys/fs/cgroup makes the container's own cgroup writable",
			Kubernetes: "no field short of securityContext.privileged: true: run cordon with --allow-degraded=cgroup and bound the pod (resources.limits)",
		}
	case NeedIdmap:
		return Fix{
			Docker:     fmt.Sprintf("docker run -v NAME:%[1]s (a named volume), --mount type=bind,src=DIR,dst=%[1]s, or --tmpfs %[1]s", path),
			Podman:     fmt.Sprintf("podman run -v NAME:%[1]s, --mount type=bind,src=DIR,dst=%[1]s, or --tmpfs %[1]s", path),
			Kubernetes: fmt.Sprintf("a volumeMount at %s of an emptyDir (medium: Memory for a tmpfs) or persistentVolumeClaim volume", path),
		}
	}
	return Fix{}
}

// String says what cordon needs, in words, for a report.
func (n Need) String() string {
	switch n {
	case NeedUserns:
		return "namespaces (seccomp)"
	case NeedRootMounts:
		return "mounts as root"
	case NeedMount:
		return "mounting (AppArmor)"
	case NeedProc:
		return "a fresh /proc"
	case NeedLandlock:
		return "Landlock"
	case NeedSeccomp:
		return "seccomp user notification"
	case NeedCgroup:
		return "a writable cgroup"
	case NeedIdmap:
		return "idmapped workspace"
	}
	return string(n)
}

// FSName names a file system by its statfs(2) magic number.
func FSName(magic int64) string {
	if name, ok := fsNames[magic]; ok {
		return name
	}
	return fmt.Sprintf("a file system of type %#x", magic)
}

var fsNames = map[int64]string{
	0x794c7630: "overlayfs",
	0x6969:     "NFS",
	0xef53:     "ext4",
	0x58465342: "XFS",
	0x01021994: "tmpfs",
	0x9123683e: "Btrfs",
	0x65735546: "a FUSE file system",
	0x01021997: "9p",
	0x2fc12fc1: "ZFS",
	0xff534d42: "CIFS",
	0xfe534d42: "SMB2",
	0x73717368: "squashfs",
	0xf2f52010: "F2FS",
}

// Join lists fixes as one line per runtime, indented.
func (f Fix) Join(indent string) string {
	var b strings.Builder
	for _, l := range []struct{ name, fix string }{{"Docker", f.Docker}, {"Podman", f.Podman}, {"Kubernetes", f.Kubernetes}} {
		fmt.Fprintf(&b, "%s%-11s %s\n", indent, l.name+":", l.fix)
	}
	return b.String()
}
