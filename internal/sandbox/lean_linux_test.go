package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"
)

// fakeLean makes leanFS hold data as the lean program for the test, and
// returns its digest.
func fakeLean(t *testing.T, data string) string {
	old := leanFS
	t.Cleanup(func() { leanFS = old })
	leanFS = fstest.MapFS{leanName: {Data: []byte(data)}}
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:])
}

func TestSharedCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the shared copy is root's")
	}
	const program = "the lean program's bytes"
	sum := fakeLean(t, program)
	dir := filepath.Join(t.TempDir(), "run")
	other := filepath.Join(dir, "sandbox-"+sumOf("an older build"))
	recent := filepath.Join(dir, "sandbox-"+sumOf("a build still in use"))
	os.Mkdir(dir, 0o755)
	for _, p := range []string{other, recent} {
		if err := os.WriteFile(p, []byte("x"), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleShared)
	os.Chtimes(other, old, old)

	f, err := sharedCopy(dir, sum)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	if string(b) != program {
		t.Fatalf("shared copy holds %q, want %q", b, program)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Mode&0o7777 != 0o555 {
		t.Errorf("shared copy is uid %d mode %o, want root's, 0555", st.Uid, st.Mode&0o7777)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("an older build's copy was kept: %v", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("a recent build's copy was removed: %v", err)
	}
	// The next cordon reuses it.
	g, err := sharedCopy(dir, sum)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var st2 unix.Stat_t
	unix.Fstat(int(g.Fd()), &st2)
	if st2.Ino != st.Ino {
		t.Error("a second cordon wrote its own copy")
	}

	// On a disk the copy is compared each time: here the program changed
	// under it, and the copy is refused.
	changed := func(t *testing.T) {
		t.Helper()
		old := leanFS
		t.Cleanup(func() { leanFS = old })
		leanFS = fstest.MapFS{leanName: {Data: []byte("the lean program's BYTES")}}
	}
	t.Run("disk", func(t *testing.T) {
		changed(t)
		if h, err := sharedCopy(dir, sum); err == nil {
			h.Close()
			t.Error("a copy on a disk was used without a compare")
		}
	})

	// On a tmpfs the copy is compared once: the next cordon finds it
	// vouched for and does not read it (here the program changed under it,
	// and the copy is still used). Changed since (a chmod), it is compared
	// again, and now refused.
	t.Run("tmpfs", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		os.Mkdir(dir, 0o755)
		if !mountTmpfs(t, dir) {
			t.Skip("no tmpfs")
		}
		f, err := sharedCopy(dir, sum)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		changed(t)
		h, err := sharedCopy(dir, sum)
		if err != nil {
			t.Fatalf("a copy vouched for was compared again: %v", err)
		}
		h.Close()
		if err := os.Chmod(filepath.Join(dir, "sandbox-"+sum), 0o555); err != nil {
			t.Fatal(err)
		}
		if h, err := sharedCopy(dir, sum); err == nil {
			h.Close()
			t.Error("a copy changed since it was vouched for was used without a compare")
		}
	})
}

// mountTmpfs mounts a tmpfs on dir for the test, in a mount namespace of
// the test's own thread; false when it cannot.
func mountTmpfs(t *testing.T, dir string) bool {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		t.Logf("no tmpfs: %v", err)
		return false
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return true
}

// TestSharedCopyRefuses: what a user other than root could have changed,
// or a file cordon did not write, is never run.
func TestSharedCopyRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the shared copy is root's")
	}
	sum := fakeLean(t, "the lean program's bytes")
	name := "sandbox-" + sum
	for _, tc := range []struct {
		what  string
		setup func(dir string) error
	}{
		{"a directory others may write", func(dir string) error { return os.Chmod(dir, 0o777) }},
		{"a directory another user owns", func(dir string) error { return os.Chown(dir, 1000, 1000) }},
		{"a directory reached through a link", func(dir string) error {
			os.Rename(dir, dir+"-real")
			return os.Symlink(dir+"-real", dir)
		}},
		{"a file another user owns", func(dir string) error {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("the lean program's bytes"), 0o555); err != nil {
				return err
			}
			return os.Chown(p, 1000, 1000)
		}},
		{"a file others may write", func(dir string) error {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("the lean program's bytes"), 0o555); err != nil {
				return err
			}
			return os.Chmod(p, 0o757)
		}},
		{"a file of another size", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nevil\n"), 0o555)
		}},
		{"a FIFO (the open must not wait for a writer)", func(dir string) error {
			return unix.Mkfifo(filepath.Join(dir, name), 0o555)
		}},
		{"a link", func(dir string) error {
			os.WriteFile(filepath.Join(dir, "elsewhere"), []byte("the lean program's bytes"), 0o555)
			return os.Symlink("elsewhere", filepath.Join(dir, name))
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			if f, err := sharedCopy(dir, sum); err == nil {
				f.Close()
				t.Fatal("used")
			}
		})
	}
	// A copy with the program's name, owner, mode and size but other
	// bytes (shipped in an image, whose /run a container runtime copies
	// into a tmpfs, or left on a disk) is compared and refused, whatever
	// record of a check came with it; one with the program's bytes is
	// used.
	for _, tmpfs := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "run")
		os.Mkdir(dir, 0o755)
		if tmpfs {
			if !mountTmpfs(t, dir) {
				continue
			}
		}
		copyPath := filepath.Join(dir, name)
		if err := os.WriteFile(copyPath, []byte("the lean program's BYTES"), 0o555); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		unix.Stat(copyPath, &st)
		boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		forged := fmt.Sprintf("%s %d %d %d.%09d %d\n", strings.TrimSpace(string(boot)), st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec+1, st.Size)
		os.WriteFile(copyPath+".ok", []byte(forged), 0o400)
		if f, err := sharedCopy(dir, sum); err == nil {
			f.Close()
			t.Errorf("tmpfs %v: a copy with other bytes was used", tmpfs)
		}
		os.Remove(copyPath)
		if err := os.WriteFile(copyPath, []byte("the lean program's bytes"), 0o555); err != nil {
			t.Fatal(err)
		}
		f, err := sharedCopy(dir, sum)
		if err != nil {
			t.Errorf("tmpfs %v: a copy with the program's bytes was refused: %v", tmpfs, err)
		} else {
			f.Close()
		}
	}
	if f, err := sharedCopy(t.TempDir(), "../../etc/passwd"); err == nil {
		f.Close()
		t.Error("a digest that is no SHA-256 named a file")
	}
}

func sumOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestSharedCopyNoexec: on a file system mounted noexec the shared copy
// could not run; it is not used (cordon falls back to a copy in memory).
func TestSharedCopyNoexec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the shared copy is root's")
	}
	sum := fakeLean(t, "the lean program's bytes")
	dir := t.TempDir()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, and its mount namespace, end with
		// the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC, "mode=0755"); err != nil {
			errc <- err
			return
		}
		f, err := sharedCopy(filepath.Join(dir, "run"), sum)
		if err == nil {
			f.Close()
			errc <- errors.New("a copy on a noexec file system was used")
			return
		}
		if !strings.Contains(err.Error(), "noexec") {
			errc <- fmt.Errorf("refused, but not for noexec: %v", err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestSharedCopyForgedRecord: where the inode number and change time are
// the medium's (a disk, a disk image a container's rootfs or /run may come
// from, FUSE, a network file system), whoever made the medium chose them,
// and, knowing the boot id and the device, could ship a record naming a
// copy with other bytes exactly. Such a copy is compared each time, also
// when it is mounted over the name in a tmpfs directory.
func TestSharedCopyForgedRecord(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the shared copy is root's")
	}
	sum := fakeLean(t, "the lean program's bytes")
	name := "sandbox-" + sum
	forge := func(t *testing.T, copyPath, okPath string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(copyPath, &st); err != nil {
			t.Fatal(err)
		}
		boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err != nil {
			t.Skip("no boot id")
		}
		rec := fmt.Sprintf("%s %d %d %d.%09d %d\n", strings.TrimSpace(string(boot)), st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec, st.Size)
		if err := os.WriteFile(okPath, []byte(rec), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	disk := t.TempDir()
	var sfs unix.Statfs_t
	if unix.Statfs(disk, &sfs) != nil || sfs.Type == unix.TMPFS_MAGIC {
		t.Skip("no disk file system for the test")
	}

	t.Run("disk", func(t *testing.T) {
		dir := filepath.Join(disk, "run")
		os.Mkdir(dir, 0o755)
		copyPath := filepath.Join(dir, name)
		if err := os.WriteFile(copyPath, []byte("the lean program's BYTES"), 0o555); err != nil {
			t.Fatal(err)
		}
		forge(t, copyPath, copyPath+".ok")
		if f, err := sharedCopy(dir, sum); err == nil {
			f.Close()
			t.Error("a copy on a disk with other bytes was used on a record made for it")
		}
	})

	t.Run("mounted over the name", func(t *testing.T) {
		dir := filepath.Join(disk, "tmp-run")
		os.Mkdir(dir, 0o755)
		if !mountTmpfs(t, dir) {
			t.Skip("no tmpfs")
		}
		src := filepath.Join(disk, "planted")
		if err := os.WriteFile(src, []byte("the lean program's BYTES"), 0o555); err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(dir, name)
		if err := os.WriteFile(copyPath, nil, 0o555); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(src, copyPath, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("no bind mount: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(copyPath, unix.MNT_DETACH) })
		forge(t, copyPath, copyPath+".ok")
		if f, err := sharedCopy(dir, sum); err == nil {
			f.Close()
			t.Error("a disk file mounted over the copy's name in a tmpfs was used on a record made for it")
		}
	})
}
