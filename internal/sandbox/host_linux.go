package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/landlock"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/seccomp"
)

// ProbeHost inspects the host. It starts one short-lived process in new
// namespaces to learn whether that works.
func ProbeHost() Host {
	var uts unix.Utsname
	unix.Uname(&uts)
	h := Host{
		Kernel:      unix.ByteSliceToString(uts.Release[:]),
		Arch:        unix.ByteSliceToString(uts.Machine[:]),
		Root:        os.Geteuid() == 0,
		UID:         os.Geteuid(),
		LandlockABI: landlock.ABI(),
	}
	switch lean, err := LeanHelper(); {
	case err != nil:
		h.SandboxProgram = err.Error()
	case lean:
		h.SandboxProgram = "lean"
	default:
		h.SandboxProgram = "cordon"
	}
	if err := tryNamespaces(); err != nil {
		h.UserNamespaces = err.Error()
	}
	if err := seccomp.Available(); err != nil {
		h.Seccomp = err.Error()
	}
	var sizes [3]uint16
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes)))
	h.SeccompNotify = errno == 0
	h.Cgroup = probeCgroup()
	return h
}

// tryNamespaces starts `cordon __hold` in the namespaces a sandbox uses.
func tryNamespaces() error {
	p, err := start(helperPath(), []string{"cordon", HoldArg}, nil, &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getegid(), Size: 1}},
		Pdeathsig:   unix.SIGKILL,
	})
	if err != nil {
		return namespaceHint(err)
	}
	ws, _, err := p.wait()
	if err != nil || ws.ExitStatus() != 0 {
		return fmt.Errorf("namespace trial: status %v, %v", ws, err)
	}
	return nil
}

func probeCgroup() Cgroup {
	var c Cgroup
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		c.Version = "none"
		return c
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		c.Version = "v2"
	} else {
		entries, _ := os.ReadDir("/sys/fs/cgroup")
		for _, e := range entries {
			var sub unix.Statfs_t
			p := "/sys/fs/cgroup/" + e.Name()
			if unix.Statfs(p, &sub) != nil {
				continue
			}
			switch sub.Type {
			case unix.CGROUP_SUPER_MAGIC:
				if strings.HasPrefix(e.Name(), "name=") || e.Name() == "systemd" {
					continue
				}
				c.V1Controllers = append(c.V1Controllers, e.Name())
			case unix.CGROUP2_SUPER_MAGIC:
				c.Version = "hybrid"
			}
		}
		if c.Version == "" {
			c.Version = "v1"
		}
		if len(c.V1Controllers) == 0 && c.Version == "hybrid" {
			c.Version = "v2"
		}
	}
	if c.Version == "v2" {
		if self, err := ownCgroupV2(); err == nil {
			if b, err := os.ReadFile("/sys/fs/cgroup" + self + "/cgroup.controllers"); err == nil {
				c.V2Controllers = strings.Fields(string(b))
			}
		}
	}
	// Delegated means what cordon run needs: a cgroup it can create below
	// its own, with every limit set. Try it.
	host, err := cgroup.System()
	if err == nil {
		var g cgroup.Group
		g, err = host.New(fmt.Sprintf("cordon-%d-probe", os.Getpid()), cgroup.Limits{MemoryBytes: 1 << 30, Pids: 64, CPUMillicores: 1000})
		if err == nil {
			c.Delegated = true
			c.Using = g.Version()
			g.Remove()
		}
	}
	if err != nil {
		c.Problem = err.Error()
	}
	return c
}

// ownCgroupV2 returns the path of the process's v2 cgroup.
func ownCgroupV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(p), nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 entry")
}

// Trial runs `true` in a sandbox built from p without a workspace, with
// every layer but those allow lets go, and reports what went wrong.
func Trial(p *profile.Profile, allow map[string]bool) error {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	q := *p
	q.Workspace = profile.Workspace{}
	o, err := Run(Options{Profile: &q, Args: []string{"true"}, Stdin: devnull, Stdout: devnull, Stderr: devnull, AllowDegraded: allow})
	if err != nil {
		return err
	}
	if !o.Clean() {
		return errors.New(o.Message)
	}
	return nil
}
