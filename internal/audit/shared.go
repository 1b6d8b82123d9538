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
//
// The log does not only grow: a writer cut off leaves an incomplete last
// line that the next writer removes, and a write that failed is undone,
// each time by a process that may not know of shared syncs (an older
// cordon) or die before saying so. A sync past such a line does not cover
// the records later written where it was. So a sync claims the file up to
// the end of its last complete line, the record holds the last bytes of
// that line (its hash, which no other record has), and a sync serves only
// while the file still holds them where they were: records written after
// a truncation have other bytes there, or end before them.

// syncState is the record of the last sync, at the start of the lock file.
type syncState struct {
	Magic             [8]byte
	Dev, Ino          uint64
	BirthSec, BirthNs int64
	Synced            int64
	// From is the file's size when the process that synced opened it:
	// that sync reports a failed writeback of what was written after.
	From   int64
	Failed uint8
	// TailLen bytes of Tail are the file's last before Synced, as the
	// sync found them.
	TailLen uint8
	_       [6]byte
	Tail    [64]byte
}

var syncMagic = [8]byte{'c', 'd', 's', 'y', 'n', 'c', '0', '3'}

// shared is what syncShared needs to know of a process's writes: the lock
// file, the file's size when the process opened it, where its writes not
// yet synced begin and end, and whether a sync of the file failed in the
// process (its file will not hear of that failure again, and it may not
// have been recorded: a sync made without the turn).
type shared struct {
	lock               *os.File
	opened, begin, end int64
	failed             bool
}

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

// syncShared makes f durable up to sh.end (where this process's last
// write to it ended), unless a sync another process finished since
// already covered it; sync is the sync itself. sh.lock is the log's lock
// file; without it, or where the file's identity cannot be told, f is
// synced as it would be alone.
//
// Another's sync covers only writes made after it opened the file: the
// kernel reports a failed writeback to each open file that was open when
// it failed, but to a file opened later only if nobody heard of it yet,
// and whoever did may not have said so here (an older cordon, a process
// that died before writing the record, a record that could not be
// written).
func syncShared(sh shared, f *os.File, sync func(*os.File) error) error {
	lock, end := sh.lock, sh.end
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
	if known && last.sameFile(id) && last.Failed == 0 && last.From <= sh.begin && last.Synced >= end && last.holds(f) {
		return nil
	}
	// What is in the file now was all written before this sync starts:
	// the sync covers it.
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return sync(f)
	}
	next := id
	next.From = sh.opened
	next.Synced, next.TailLen = lineEnd(f, st.Size, &next.Tail)
	if next.Synced == 0 && known && last.sameFile(id) && last.holds(f) {
		next.From, next.Synced, next.TailLen, next.Tail = last.From, last.Synced, last.TailLen, last.Tail
	}
	err := sync(f)
	if err != nil || sh.failed || (known && last.sameFile(id) && last.Failed != 0) {
		next.Failed = 1
	}
	writeState(lock, next)
	return err
}

// lineEnd returns where the last complete line of f's first size bytes
// ends, with the bytes before that copied to tail: they end with the
// line's hash, which no other record has. It returns 0 when it finds no
// such line near the end (a long write under way, or a cut).
func lineEnd(f *os.File, size int64, tail *[64]byte) (int64, uint8) {
	const window = 16 << 10
	off := max(0, size-window)
	b := make([]byte, size-off)
	if n, _ := f.ReadAt(b, off); n != len(b) {
		return 0, 0
	}
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		return 0, 0
	}
	n := min(i+1, len(tail))
	if n < len(tail) && off > 0 {
		return 0, 0
	}
	copy(tail[:], b[i+1-n:i+1])
	return off + int64(i) + 1, uint8(n)
}

// holds reports whether f still holds, where s's sync found them, the
// last bytes that sync covered.
func (s syncState) holds(f *os.File) bool {
	if int(s.TailLen) > len(s.Tail) || int64(s.TailLen) > s.Synced {
		return false
	}
	if s.TailLen == 0 {
		return s.Synced == 0
	}
	b := make([]byte, s.TailLen)
	n, _ := f.ReadAt(b, s.Synced-int64(s.TailLen))
	return n == len(b) && bytes.Equal(b, s.Tail[:s.TailLen])
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
