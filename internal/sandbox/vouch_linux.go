package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// A shared copy of the sandbox program is compared with the program's
// bytes the first time a cordon finds it, wherever /run is: a tmpfs may
// have been filled from an image (a container runtime copies the image's
// /run into the tmpfs it mounts there), and a disk may hold a copy from
// before this boot. Once compared, or written, the copy is vouched for in
// NAME.ok: this boot, and the copy's inode and change time, which the
// kernel sets when the inode is made or changed and no one can choose. A
// record shipped with an image cannot name the inode as it is on this
// host; a copy changed since (its bytes, owner or mode) no longer matches
// its record, and is compared again.
//
// Only a copy on a tmpfs is vouched for (the copy's own file system: a
// file may be mounted over the name, from elsewhere than the directory):
// there the kernel gives the inode its number and change time when this
// boot makes it. A disk, a disk image (squashfs, erofs, an ext4 file, as
// a container's rootfs may be), overlayfs (whose lower layers may be
// such images), FUSE or a network file system report the inode number and
// change time their medium or server holds, which whoever made it chose:
// knowing the boot id (anyone on the host can read it) and the device
// number, they could write a record that vouches for other bytes. A copy
// there is compared each time.

// maxVouch bounds the record read.
const maxVouch = 256

// vouchFor is the record of f, whose fstat is st, in this boot; "" when
// the boot cannot be told, or f is not on a tmpfs (then nothing is
// vouched for). It is taken before f is compared: a copy changed during
// the compare no longer matches it.
func vouchFor(f *os.File, st *unix.Stat_t) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	var sfs unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &sfs) != nil || sfs.Type != unix.TMPFS_MAGIC {
		return ""
	}
	return fmt.Sprintf("%s %d %d %d.%09d %d\n", strings.TrimSpace(string(boot)), st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec, st.Size)
}

// vouched reports whether name.ok, in the directory dfd, is the record
// want.
func vouched(dfd int, name, want string) bool {
	if want == "" {
		return false
	}
	r, st, err := openRootOnly(dfd, name+".ok")
	if err != nil {
		return false
	}
	defer r.Close()
	if st.Size > maxVouch {
		return false
	}
	got, err := io.ReadAll(io.LimitReader(r, maxVouch))
	return err == nil && string(got) == want
}

// vouch writes rec, the record of a copy just compared, as name.ok in the
// directory dfd; a record that cannot be written only means the next
// cordon compares again.
func vouch(dfd int, name, rec string) {
	if rec == "" {
		return
	}
	b := make([]byte, 8)
	rand.Read(b)
	tmp := name + ".ok." + hex.EncodeToString(b)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return
	}
	w := os.NewFile(uintptr(fd), tmp)
	_, err = w.WriteString(rec)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name+".ok")
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
	}
}
