package audit

import (
	"bytes"
	"encoding/binary"
	"os"

	"golang.org/x/sys/unix"
)

// Syncs shared between processes. Every cordon run appends its records to
// the same log and makes them durable before it ends; when many run at
// once, one fdatasync can serve them all. The log's lock file holds the
// last sync any process finished: which file (device, inode and birth
// time, so that a new file on a reused inode is not taken for it), how far
// into it the sync reached, and whether a sync of that file ever failed
// (then nobody relies on another's sync again: the kernel reports a
// failed writeback to each open file once, and a later sync's success
// would not cover what was lost). Syncs take turns on a lock of one byte
// of the lock file, so a process that waits while another syncs finds,
// once its turn comes, whether that sync covered it.

// syncState is the record of the last sync, at the start of the lock file.
type syncState struct {
	Magic             [8]byte
	Dev, Ino          uint64
	BirthSec, BirthNs int64
	Synced            int64
	Failed            uint8
	_                 [7]byte
}

var syncMagic = [8]byte{'c', 'd', 's', 'y', 'n', 'c', '0', '1'}

// syncTurn is the byte of the lock file whose lock is the sync turn; the
// writers' flock on the whole file does not interact with it.
const syncTurn = 1 << 20

// identity is f's device, inode and birth time; ok is false where the
// file system does not keep a birth time.
func identity(f *os.File) (s syncState, ok bool) {
	var stx unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_INO|unix.STATX_BTIME, &stx) != nil ||
		stx.Mask&unix.STATX_BTIME == 0 {
		return s, false
	}
	s.Magic = syncMagic
	s.Dev = unix.Mkdev(stx.Dev_major, stx.Dev_minor)
	s.Ino = stx.Ino
	s.BirthSec, s.BirthNs = stx.Btime.Sec, int64(stx.Btime.Nsec)
	return s, true
}

// sameFile reports whether two records name the same file.
func (s syncState) sameFile(o syncState) bool {
	return s.Magic == o.Magic && s.Dev == o.Dev && s.Ino == o.Ino && s.BirthSec == o.BirthSec && s.BirthNs == o.BirthNs
}

// syncShared makes f durable up to end (where this process's last write to
// it ended), unless a sync another process finished since already covered
// it; sync is the sync itself. lock is the log's lock file; without it, or
// where the file's identity cannot be told, f is synced as it would be
// alone.
func syncShared(lock, f *os.File, end int64, sync func(*os.File) error) error {
	id, ok := identity(f)
	if lock == nil || !ok {
		return sync(f)
	}
	turn := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: syncTurn, Len: 1}
	for {
		err := unix.FcntlFlock(lock.Fd(), unix.F_OFD_SETLKW, &turn)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return sync(f)
		}
	}
	defer func() {
		turn.Type = unix.F_UNLCK
		unix.FcntlFlock(lock.Fd(), unix.F_OFD_SETLK, &turn)
	}()
	last, known := readState(lock)
	if known && last.sameFile(id) && last.Failed == 0 && last.Synced >= end {
		return nil
	}
	// What is in the file now was all written before this sync starts:
	// the sync covers it.
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return sync(f)
	}
	err := sync(f)
	next := id
	switch {
	case err != nil || (known && last.sameFile(id) && last.Failed != 0):
		next.Failed = 1
	case known && last.sameFile(id):
		next.Synced = max(last.Synced, st.Size)
	default:
		next.Synced = st.Size
	}
	writeState(lock, next)
	return err
}

func readState(lock *os.File) (syncState, bool) {
	var s syncState
	b := make([]byte, binary.Size(s))
	if n, _ := lock.ReadAt(b, 0); n != len(b) {
		return s, false
	}
	if binary.Read(bytes.NewReader(b), binary.LittleEndian, &s) != nil || s.Magic != syncMagic {
		return s, false
	}
	return s, true
}

func writeState(lock *os.File, s syncState) {
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, s)
	lock.WriteAt(buf.Bytes(), 0)
}
