// Package container tells whether cordon runs inside a container (Docker,
// Podman, Kubernetes or another runtime) and, for each thing cordon needs
// that a container runtime may take away, what to give the runtime to get
// it back: the flags of docker run and podman run, and the fields of a
// Kubernetes pod. It only reads files, below a root directory, so that it
// is tested against fake trees as well as the real one.
package container

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Info is what Detect found.
type Info struct {
	// Runtime is "docker", "podman", "kubernetes", the value of PID 1's
	// container= variable (lxc, systemd-nspawn...), or "container" when
	// only the layout says so; "" when cordon does not run in a container.
	Runtime string `json:"runtime,omitempty"`
	// Evidence lists what showed it.
	Evidence []string `json:"evidence,omitempty"`
	// OverlayRoot reports an overlay root file system, which cannot be
	// idmapped.
	OverlayRoot bool `json:"overlay_root"`
	// MaskedProc are mounts over parts of /proc (the runtime's masked and
	// read-only paths): the kernel then refuses a fresh /proc to a new user
	// namespace.
	MaskedProc []string `json:"masked_proc,omitempty"`
	// CgroupReadOnly reports a cgroup file system mounted read-only.
	CgroupReadOnly bool `json:"cgroup_read_only"`
	// AppArmor is the AppArmor profile cordon runs under, "" when none.
	AppArmor string `json:"apparmor,omitempty"`
	// SysAdmin reports CAP_SYS_ADMIN in cordon's effective capabilities.
	SysAdmin bool `json:"cap_sys_admin"`
}

// In reports whether cordon runs in a container.
func (i Info) In() bool { return i.Runtime != "" }

// Detect inspects the system whose root directory is root ("/" but in
// tests): the files runtimes leave (/.dockerenv, /run/.containerenv, a
// Kubernetes service account), PID 1's container= variable, cordon's
// cgroup path, and its mount table (/proc/self/mountinfo). What cannot be
// read is taken as absent.
func Detect(root string) Info {
	var i Info
	found := func(runtime, evidence string) {
		if i.Runtime == "" || rank(runtime) > rank(i.Runtime) {
			i.Runtime = runtime
		}
		i.Evidence = append(i.Evidence, evidence)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	if exists(at("/.dockerenv")) {
		found("docker", "/.dockerenv")
	}
	if exists(at("/run/.containerenv")) {
		found("podman", "/run/.containerenv")
	}
	if exists(at("/var/run/secrets/kubernetes.io/serviceaccount")) {
		found("kubernetes", "a Kubernetes service account at /var/run/secrets/kubernetes.io")
	}
	if env, err := os.ReadFile(at("/proc/1/environ")); err == nil {
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("container=")); ok && len(v) > 0 {
				found(string(v), "container="+string(v)+" in the environment of PID 1")
			}
			if bytes.HasPrefix(kv, []byte("KUBERNETES_SERVICE_HOST=")) {
				found("kubernetes", "KUBERNETES_SERVICE_HOST in the environment of PID 1")
			}
		}
	}
	if cg, err := os.ReadFile(at("/proc/self/cgroup")); err == nil {
		for _, m := range []struct{ word, runtime string }{{"kubepods", "kubernetes"}, {"libpod", "podman"}, {"docker", "docker"}} {
			if bytes.Contains(cg, []byte(m.word)) {
				found(m.runtime, "cgroup path with "+m.word)
				break
			}
		}
	}
	for _, m := range mounts(at("/proc/self/mountinfo")) {
		switch {
		case m.point == "/" && m.fsType == "overlay":
			i.OverlayRoot = true
		case strings.HasPrefix(m.point, "/proc/") && m.point != "/proc/sys/fs/binfmt_misc":
			i.MaskedProc = append(i.MaskedProc, m.point)
		case (m.point == "/sys/fs/cgroup" || strings.HasPrefix(m.point, "/sys/fs/cgroup/")) &&
			(m.fsType == "cgroup" || m.fsType == "cgroup2") && m.readOnly:
			i.CgroupReadOnly = true
		}
	}
	if i.Runtime == "" && i.OverlayRoot && len(i.MaskedProc) > 0 {
		found("container", "an overlay root file system and masked /proc paths")
	}
	if status, err := os.ReadFile(at("/proc/self/status")); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
				caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
				i.SysAdmin = err == nil && caps&(1<<capSysAdmin) != 0
			}
		}
	}
	for _, p := range []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"} {
		b, err := os.ReadFile(at(p))
		if err != nil {
			continue
		}
		label := strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
		if label != "" && label != "unconfined" && !strings.Contains(label, ":") { // SELinux labels have colons
			i.AppArmor = label
		}
		break
	}
	return i
}

// capSysAdmin is CAP_SYS_ADMIN's bit.
const capSysAdmin = 21

// rank orders runtimes by how specific they are: Kubernetes runs its pods
// with Docker or Podman's files, Podman sets container=podman.
func rank(runtime string) int {
	switch runtime {
	case "kubernetes":
		return 4
	case "podman":
		return 3
	case "docker":
		return 2
	case "container":
		return 0
	}
	return 1
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

type mount struct {
	point, fsType string
	readOnly      bool
}

// mounts reads a mountinfo file: ID, parent, dev, root, mount point,
// options, optional fields up to "-", then type, source, super options.
func mounts(path string) []mount {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for j, f := range fields {
			if f == "-" {
				sep = j
				break
			}
		}
		if len(fields) < 6 || sep < 6 || sep+1 >= len(fields) {
			continue
		}
		opts := strings.Split(fields[5], ",")
		ro := false
		for _, o := range opts {
			if o == "ro" {
				ro = true
			}
		}
		out = append(out, mount{point: unescape(fields[4]), fsType: fields[sep+1], readOnly: ro})
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
