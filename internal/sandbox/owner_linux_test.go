package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestStartOwned starts a process in a new user namespace as cordon does
// as root: the namespace belongs to usernsOwner, and no thread of this
// process keeps the owner's uid or the securebit afterwards.
func TestStartOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// The thread that forks, whose credentials change meanwhile, is this
	// one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := startOwned("/bin/sleep", []string{"sleep", "30"}, nil, &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: nobody, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: nobody, Size: 1}},
		Pdeathsig:   unix.SIGKILL,
	})
	if err != nil {
		t.Skipf("this host cannot create user namespaces: %v", err)
	}
	defer p.kill()

	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", p.pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var owner uint32
	const nsGetOwnerUID = 0xb704 // NS_GET_OWNER_UID
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, ns.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&owner))); errno != 0 {
		t.Fatalf("NS_GET_OWNER_UID: %v", errno)
	}
	if owner != usernsOwner {
		t.Errorf("the user namespace belongs to uid %d, want %d", owner, usernsOwner)
	}

	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("listing threads: %v", err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" && strings.Join(f[1:], " ") != "0 0 0 0" {
				t.Errorf("%s: %s", task, line)
			}
		}
	}
	var ruid, euid, suid uint32
	unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&ruid)), uintptr(unsafe.Pointer(&euid)), uintptr(unsafe.Pointer(&suid)))
	if ruid != 0 || euid != 0 || suid != 0 {
		t.Errorf("the forking thread's uids are %d %d %d after starting", ruid, euid, suid)
	}
	bits, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0)
	if errno != 0 || bits&secbitNoSetuidFixup != 0 {
		t.Errorf("the forking thread's securebits are %#x (%v) after starting", bits, errno)
	}
}
