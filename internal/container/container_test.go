package container

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeRoot lays out files (path -> content) below a temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A Docker container's mount table: an overlay root, /proc with masked
// and read-only paths, a read-only cgroup2.
const dockerMounts = `100 90 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/var/lib/docker/l/A,upperdir=/var/lib/docker/u,workdir=/var/lib/docker/w
101 100 0:52 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
102 100 0:53 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw
103 101 0:52 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw
104 101 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw,size=4k
105 101 0:54 / /proc/acpi ro,relatime - tmpfs tmpfs ro
106 101 0:55 / /proc/sys/fs/binfmt_misc rw,relatime - binfmt_misc binfmt_misc rw
107 100 0:56 / /my\040work rw,relatime - ext4 /dev/sda1 rw
`

func TestDetect(t *testing.T) {
	for _, tt := range []struct {
		name      string
		files     map[string]string
		runtime   string
		evidence  string
		overlay   bool
		masked    []string
		cgroupRO  bool
		apparmor  string
		sysAdmin  bool
		notInside bool
	}{
		{name: "docker", files: map[string]string{
			"/.dockerenv": "", "/proc/self/mountinfo": dockerMounts,
			"/proc/self/cgroup":                "0::/system.slice/docker-abc.scope\n",
			"/proc/self/attr/apparmor/current": "docker-default (enforce)\n",
			"/proc/self/status":                "Name:\tcordon\nCapEff:\t00000000a80425fb\n",
		}, runtime: "docker", evidence: "/.dockerenv", overlay: true, masked: []string{"/proc/bus", "/proc/kcore", "/proc/acpi"},
			cgroupRO: true, apparmor: "docker-default (enforce)"},
		{name: "podman", files: map[string]string{
			"/run/.containerenv": "", "/proc/1/environ": "PATH=/bin\x00container=podman\x00",
			"/proc/self/status": "CapEff:\t000001ffffffffff\n",
		}, runtime: "podman", evidence: "container=podman in the environment of PID 1", sysAdmin: true},
		{name: "kubernetes wins over docker", files: map[string]string{
			"/.dockerenv": "", "/proc/1/environ": "KUBERNETES_SERVICE_HOST=10.0.0.1\x00",
		}, runtime: "kubernetes", evidence: "KUBERNETES_SERVICE_HOST in the environment of PID 1"},
		{name: "kubernetes by cgroup", files: map[string]string{
			"/proc/self/cgroup": "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope\n",
		}, runtime: "kubernetes", evidence: "cgroup path with kubepods"},
		{name: "lxc", files: map[string]string{"/proc/1/environ": "container=lxc\x00"}, runtime: "lxc", evidence: "container=lxc in the environment of PID 1"},
		{name: "unknown runtime, by layout", files: map[string]string{"/proc/self/mountinfo": dockerMounts},
			runtime: "container", evidence: "an overlay root file system and masked /proc paths", overlay: true, cgroupRO: true,
			masked: []string{"/proc/bus", "/proc/kcore", "/proc/acpi"}},
		{name: "a host", files: map[string]string{
			"/proc/self/mountinfo":    "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:5 / /proc rw - proc proc rw\n3 2 0:6 / /proc/sys/fs/binfmt_misc rw - binfmt_misc b rw\n",
			"/proc/self/cgroup":       "0::/user.slice/user-1000.slice/session-2.scope\n",
			"/proc/self/attr/current": "unconfined\n",
		}, notInside: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			i := Detect(fakeRoot(t, tt.files))
			if tt.notInside {
				if i.In() || len(i.MaskedProc) != 0 || i.OverlayRoot || i.AppArmor != "" {
					t.Fatalf("a host taken for a container: %+v", i)
				}
				return
			}
			if i.Runtime != tt.runtime || !slices.Contains(i.Evidence, tt.evidence) {
				t.Errorf("runtime %q, evidence %q; want %q with %q", i.Runtime, i.Evidence, tt.runtime, tt.evidence)
			}
			if i.OverlayRoot != tt.overlay || i.CgroupReadOnly != tt.cgroupRO || i.AppArmor != tt.apparmor || i.SysAdmin != tt.sysAdmin {
				t.Errorf("got %+v", i)
			}
			if !slices.Equal(i.MaskedProc, tt.masked) {
				t.Errorf("masked %q, want %q (binfmt_misc is no mask)", i.MaskedProc, tt.masked)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/my\040work\134x`); got != `/my work\x` {
		t.Errorf("got %q", got)
	}
}

// Every need has a fix for each runtime, and the idmap fix names the path.
func TestFixes(t *testing.T) {
	for _, n := range Needs {
		f := Fixes(n, "/srv/ws")
		if f.Docker == "" || f.Podman == "" || f.Kubernetes == "" {
			t.Errorf("%s: incomplete fix %+v", n, f)
		}
		if n.String() == string(n) {
			t.Errorf("%s: no description", n)
		}
	}
	f := Fixes(NeedIdmap, "/srv/ws")
	for _, want := range []string{"-v NAME:/srv/ws", "--tmpfs /srv/ws"} {
		if !strings.Contains(f.Docker, want) || !strings.Contains(f.Podman, want) {
			t.Errorf("idmap fix lacks %q: %+v", want, f)
		}
	}
	if !strings.Contains(f.Kubernetes, "emptyDir") || !strings.Contains(f.Kubernetes, "persistentVolumeClaim") {
		t.Errorf("kubernetes idmap fix: %q", f.Kubernetes)
	}
	if got := Fixes(NeedProc, "").Docker; got != "docker run --security-opt systempaths=unconfined" {
		t.Errorf("proc fix for docker: %q", got)
	}
	if FSName(0x794c7630) != "overlayfs" || !strings.Contains(FSName(0x1234), "0x1234") {
		t.Error("file system names")
	}
}
