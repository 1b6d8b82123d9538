package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMaxSize is the size past which a log file is rotated.
const DefaultMaxSize = 64 << 20

// Log appends events to one audit log. Events are queued and written in
// batches: one lock and one write for every event queued meanwhile, by
// this process's sandboxes together. Writing and syncing are separate
// turns (group commit): while one fdatasync is under way the next batch
// is written, and the next fdatasync covers every record written by then,
// so that each sync serves every caller waiting; a Flush returns only once
// its records are on the disk. Other processes appending to the same log
// take turns on its lock file, held only while they write (each batch
// continues the chain from whatever the log ends with); their syncs
// overlap.
type Log struct {
	path string
	// MaxSize rotates the file when an append would take it past this.
	maxSize int64
	key     ed25519.PrivateKey

	mu         sync.Mutex
	queue      []queued
	waiters    []chan error
	writing    bool
	checkpoint bool
	// The sync turn, under mu. writes counts this process's writes,
	// synced the last of them known on the disk; syncing, when set, is
	// closed when the sync under way ends. A sync that failed makes every
	// write up to failedTo fail with failed (the kernel reports a failed
	// writeback once: a later sync's success would not cover it).
	// unsynced holds the events of the writes not yet synced, counted as
	// lost if their sync fails.
	writes, synced uint64
	syncing        chan struct{}
	// pending holds the writes that callers wait to see synced, one per
	// caller, in order; expect is how many callers were waiting when the
	// last sync ended (those it released, and the rest), so how many the
	// next sync can hope to serve. gather, when set, is closed once that
	// many wait again. lastSync is how long the last sync took.
	pending  []uint64
	expect   int
	gather   chan struct{}
	lastSync time.Duration
	// maxGather bounds gatherLocked's wait; tests lengthen it.
	maxGather time.Duration
	// end is where this process's last write to file ended, and syncLock
	// the lock file then: a sync another process finished past end
	// covers it (see shared.go). opened is file's size when this process
	// opened it, and fileFailed tells that a sync of it failed here.
	end, opened int64
	syncLock    *os.File
	fileFailed  bool
	failedTo    uint64
	failed      error
	unsynced    []pending
	// fsync makes a file's written data durable (fdatasync, which also
	// persists the size an append changed); tests count calls.
	fsync func(*os.File) error
	// last is the file as this process left it after its last write, and
	// the chain's head then: when the file is still exactly so, nobody
	// appended since, and the head need not be read back. Only the writer
	// of the moment touches them.
	last     fileState
	lastHead *Record
	// lock and file stay open between writes; file changes (under mu)
	// only once the sync turn has made it durable.
	lock, file *os.File
	// written, when set, receives the records of each write once they are
	// in the file (see OnWrite).
	written func([]Record)
	// lost counts, by type, the events of writes that failed since the
	// last one that succeeded, and lostWhy says why the first failed: the
	// next write says so in the chain (see gap).
	lost    map[string]int
	lostWhy string
	lostAt  time.Time
}

// OnWrite has f called with the records of every later write, in the
// chain's order (seq, prev and hash set), once they are in the file and
// before they are synced. f runs under the log's lock: it must not block
// or write to the log.
func (l *Log) OnWrite(f func([]Record)) {
	l.mu.Lock()
	l.written = f
	l.mu.Unlock()
}

// current returns the log file, kept open between writes and opened again
// when it is no longer the file at the log's path (another process rotated
// it, or it was removed). The caller holds the lock.
func (l *Log) current() (*os.File, os.FileInfo, error) {
	if l.file != nil {
		open, err1 := l.file.Stat()
		now, err2 := os.Stat(l.path)
		if err1 == nil && err2 == nil && os.SameFile(open, now) {
			return l.file, open, nil
		}
		if err := l.retire(); err != nil {
			return nil, nil, err
		}
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	l.mu.Lock()
	l.file, l.opened, l.fileFailed = f, fi.Size(), false
	l.mu.Unlock()
	return f, fi, nil
}

// pending is a write not yet synced: its number, its events and where in
// the file it started.
type pending struct {
	n      uint64
	events []queued
	start  int64
}

// toShareLocked describes the sync of the writes to the current file not
// yet synced, for syncShared. The caller holds mu.
func (l *Log) toShareLocked() shared {
	s := shared{lock: l.syncLock, opened: l.opened, begin: l.end, end: l.end, failed: l.fileFailed}
	if len(l.unsynced) > 0 {
		s.begin = l.unsynced[0].start
	}
	return s
}

// queued is an event waiting to be written, with its JSON, encoded by the
// caller of Add rather than by the writer of the moment.
type queued struct {
	Event
	body []byte
	err  error
}

// fdatasync persists f's data and its size.
func fdatasync(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := c.Control(func(fd uintptr) {
		for {
			err = unix.Fdatasync(int(fd))
			if err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		return cerr
	}
	return err
}

// durable returns once every write this process made before the call is
// on the disk. One sync runs at a time and covers every write made before
// it started: callers that find one under way wait for it, and the first
// of those it does not cover starts the next, for all of them.
func (l *Log) durable() error {
	l.mu.Lock()
	target := l.writes
	if target > l.synced && target > l.failedTo {
		l.pending = append(l.pending, target)
		if l.gather != nil && len(l.pending) >= l.expect {
			close(l.gather)
			l.gather = nil
		}
	}
	for {
		if target <= l.failedTo {
			err := l.failed
			l.mu.Unlock()
			return err
		}
		if target <= l.synced {
			l.mu.Unlock()
			return nil
		}
		if wait := l.syncing; wait != nil {
			l.mu.Unlock()
			<-wait
			l.mu.Lock()
			continue
		}
		done := make(chan struct{})
		l.syncing = done
		l.gatherLocked()
		l.syncTurnLocked(done)
	}
}

// syncTurnLocked syncs the writes made so far in the sync turn done (the
// caller set it in syncing), then ends the turn. The caller holds mu;
// mu is held again on return.
func (l *Log) syncTurnLocked(done chan struct{}) error {
	f, upto, sh := l.file, l.writes, l.toShareLocked()
	l.mu.Unlock()
	var err error
	start := time.Now()
	if f != nil {
		err = syncShared(sh, f, l.fsync)
	}
	l.mu.Lock()
	l.lastSync = time.Since(start)
	l.syncedTo(upto, err)
	close(done)
	return err
}

// gatherLocked lets the callers the last sync released write again before
// the next sync starts, so that it serves them too: it waits until as many
// callers wait as did when the last sync ended, for half a sync's time at
// most. A lone caller does not wait. The caller holds mu and the sync
// turn; mu is held again on return.
func (l *Log) gatherLocked() {
	if l.expect <= 1 || len(l.pending) >= l.expect {
		return
	}
	bound := min(l.lastSync/2, l.maxGather)
	if bound <= 0 {
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
		return
	}
	g := make(chan struct{})
	l.gather = g
	l.mu.Unlock()
	t := time.NewTimer(bound)
	select {
	case <-g:
	case <-t.C:
	}
	t.Stop()
	l.mu.Lock()
	if l.gather == g {
		l.gather = nil
	}
}

// maxGather bounds the wait of gatherLocked on a slow disk.
const maxGather = time.Millisecond

// syncedTo ends a sync that covered the writes up to upto. The caller
// holds mu and owns the sync turn.
func (l *Log) syncedTo(upto uint64, err error) {
	l.syncing = nil
	served := 0
	for served < len(l.pending) && l.pending[served] <= upto {
		served++
	}
	l.expect = len(l.pending)
	l.pending = append(l.pending[:0], l.pending[served:]...)
	i := 0
	for i < len(l.unsynced) && l.unsynced[i].n <= upto {
		i++
	}
	covered := l.unsynced[:i]
	l.unsynced = l.unsynced[i:]
	if err != nil {
		l.fileFailed = true
		l.failedTo, l.failed = upto, fmt.Errorf("audit log: %w", err)
		for _, p := range covered {
			l.loseLocked(p.events, l.failed)
		}
		return
	}
	l.synced = max(l.synced, upto)
}

// settle makes everything written to the current file durable, taking the
// sync turn; with retire, the file is then closed and forgotten (it was
// rotated away). The caller is the writer of the moment.
func (l *Log) settle(retire bool) error {
	l.mu.Lock()
	for l.syncing != nil {
		wait := l.syncing
		l.mu.Unlock()
		<-wait
		l.mu.Lock()
	}
	f, upto := l.file, l.writes
	var err error
	if f != nil && upto > l.synced && upto > l.failedTo {
		done := make(chan struct{})
		l.syncing = done
		err = l.syncTurnLocked(done)
	}
	if retire {
		l.file = nil
	}
	l.mu.Unlock()
	if retire && f != nil {
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// retire settles the current file and closes it.
func (l *Log) retire() error { return l.settle(true) }

// fileState tells whether a file changed: an append changes its size and
// modification time, a rotation its inode.
type fileState struct {
	ino, size int64
	mtime     int64
}

func stateOf(fi os.FileInfo) fileState {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileState{}
	}
	return fileState{ino: int64(st.Ino), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// Options configure a Log.
type Options struct {
	// MaxSize is the rotation size; 0 means DefaultMaxSize.
	MaxSize int64
	// Key signs a checkpoint over the chain's head after every flush that
	// asks for one; nil: no signatures.
	Key ed25519.PrivateKey
}

// Open prepares the log at path (its directory is created, 0700).
func Open(path string, o Options) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log directory: %w", err)
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	return &Log{path: path, maxSize: o.MaxSize, key: o.Key, fsync: fdatasync, maxGather: maxGather}, nil
}

// Path is the log's current file.
func (l *Log) Path() string { return l.path }

// Add queues events; they reach the disk with the next Flush, or with
// another caller's.
func (l *Log) Add(evs ...Event) {
	qs := make([]queued, len(evs))
	for i, ev := range evs {
		if ev.Time.IsZero() {
			ev.Time = time.Now().UTC()
		}
		qs[i].Event = ev
		qs[i].body, qs[i].err = json.Marshal(ev)
	}
	l.mu.Lock()
	l.queue = append(l.queue, qs...)
	l.mu.Unlock()
}

// Flush writes every queued event and returns once they are on the disk
// (fsync). Concurrent callers share a write: whoever writes takes all that
// is queued, and the others wait for it.
func (l *Log) Flush() error { return l.flush(false, true) }

// Write writes every queued event without waiting for the disk: they
// survive the process, not a power cut, until the next Flush or Seal.
func (l *Log) Write() error { return l.flush(false, false) }

// Seal flushes, and with a key, follows the batch with a signed checkpoint
// over the chain's head (cordon seals at the end of every run).
func (l *Log) Seal() error { return l.flush(true, true) }

func (l *Log) flush(checkpoint, sync bool) error {
	if err := l.writeQueued(checkpoint); err != nil || !sync {
		return err
	}
	return l.durable()
}

// writeQueued writes every queued event: whoever finds no write under way
// writes all that is queued, again while more callers wait, and the others
// wait for it.
func (l *Log) writeQueued(checkpoint bool) error {
	done := make(chan error, 1)
	l.mu.Lock()
	l.checkpoint = l.checkpoint || checkpoint
	l.waiters = append(l.waiters, done)
	if l.writing {
		l.mu.Unlock()
		return <-done
	}
	l.writing = true
	for {
		batch, waiters, cp := l.queue, l.waiters, l.checkpoint
		l.queue, l.waiters, l.checkpoint = nil, nil, false
		l.mu.Unlock()
		err := l.write(batch, cp)
		if err != nil {
			l.lose(batch, err)
		}
		for _, w := range waiters {
			w <- err
		}
		l.mu.Lock()
		if len(l.waiters) == 0 {
			l.writing = false
			l.mu.Unlock()
			return <-done
		}
	}
}

// Append adds events and flushes them.
func (l *Log) Append(evs ...Event) error {
	l.Add(evs...)
	return l.Flush()
}

// write appends a batch under the log's lock; the sync is the caller's.
func (l *Log) write(batch []queued, checkpoint bool) error {
	if len(batch) == 0 && !(checkpoint && l.key != nil) {
		return nil
	}
	if l.lock == nil {
		lock, err := os.OpenFile(l.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("audit log lock: %w", err)
		}
		l.lock = lock
	}
	lock := l.lock
	if err := flock(lock); err != nil {
		return fmt.Errorf("audit log lock: %w", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	f, fi, err := l.current()
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	head, dropped, err := l.tail(f, fi)
	if err != nil {
		return err
	}
	size := fi.Size() - dropped
	var buf bytes.Buffer
	var recs []Record
	add := func(ev Event) error {
		r := &Record{Seq: head.Seq + 1, Prev: head.Hash, Event: ev}
		line, err := encode(r)
		if err != nil {
			return fmt.Errorf("audit record: %w", err)
		}
		buf.Write(line)
		recs = append(recs, *r)
		head = r
		return nil
	}
	if dropped > 0 {
		add(Event{Time: time.Now().UTC(), Kind: Decision, Type: "recovered",
			Data: map[string]any{"dropped_bytes": dropped, "reason": "an incomplete last line, from a write that was cut off, was removed"}})
	}
	if gap := l.gap(); gap != nil {
		add(*gap)
	}
	for _, q := range batch {
		if q.err != nil {
			return fmt.Errorf("audit record: %w", q.err)
		}
		r := &Record{Seq: head.Seq + 1, Prev: head.Hash, Event: q.Event}
		var line []byte
		line, r.Hash = chainLine(r.Seq, r.Prev, q.body)
		buf.Write(line)
		recs = append(recs, *r)
		head = r
	}
	var cp *Checkpoint
	if checkpoint && l.key != nil && head.Seq > 0 {
		cp = sign(l.key, head.Seq, head.Hash)
		add(Event{Time: time.Now().UTC(), Kind: Decision, Type: "checkpoint", Data: cp})
	}
	if size > 0 && size+int64(buf.Len()) > l.maxSize {
		if f, err = l.rotate(); err != nil {
			return err
		}
		var opened int64
		if fi, err := f.Stat(); err == nil {
			opened = fi.Size()
		} else {
			opened = 1 << 62 // unknown: no other's sync covers it
		}
		l.mu.Lock()
		l.file, l.opened, l.fileFailed = f, opened, false
		l.mu.Unlock()
		size = 0
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		l.lastHead = nil
		// A write cut off by a full disk leaves no partial line behind:
		// the gap is recorded by the next write instead (see gap).
		f.Truncate(size)
		return fmt.Errorf("audit log: %w", err)
	}
	l.lastHead = nil
	l.mu.Lock()
	l.lost, l.lostWhy = nil, ""
	l.writes++
	l.end, l.syncLock = size+int64(buf.Len()), lock
	l.unsynced = append(l.unsynced, pending{l.writes, batch, size})
	l.mu.Unlock()
	if fi, err := f.Stat(); err == nil {
		l.last, l.lastHead = stateOf(fi), head
	}
	l.mu.Lock()
	written := l.written
	l.mu.Unlock()
	if written != nil {
		written(recs)
	}
	if cp != nil {
		// The head names records that must be on the disk before it.
		if err := l.settle(false); err != nil {
			return err
		}
		return writeHead(l.path, cp)
	}
	return nil
}

// lose counts the events of a write that failed, for the record of the
// gap the next write adds.
func (l *Log) lose(batch []queued, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(batch, err)
}

func (l *Log) loseLocked(batch []queued, err error) {
	if l.lost == nil {
		l.lost, l.lostWhy, l.lostAt = map[string]int{}, err.Error(), time.Now().UTC()
	}
	for _, ev := range batch {
		l.lost[ev.Type]++
	}
}

// gap returns the record of the events lost since the last write that
// succeeded (nil when none were): how many of each type, since when and
// why. They are not written late: the requests they describe were
// answered as failed (see cordon serve), or ran unrecorded, and the
// chain says so rather than hiding the hole.
func (l *Log) gap() *Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lost) == 0 {
		return nil
	}
	n := 0
	types := map[string]int{}
	for t, c := range l.lost {
		types[t], n = c, n+c
	}
	return &Event{Time: time.Now().UTC(), Kind: Decision, Type: "records_lost",
		Data: map[string]any{"events": n, "types": types, "since": l.lostAt, "error": l.lostWhy}}
}

// tail returns the last record of the chain (a zero record for a new
// log), looking into the newest rotated file when the current one is
// empty. An incomplete last line is cut off; its size is returned so that
// the chain can say so.
func (l *Log) tail(f *os.File, fi os.FileInfo) (*Record, int64, error) {
	if st := stateOf(fi); l.lastHead != nil && st.ino != 0 && st == l.last {
		return l.lastHead, 0, nil
	}
	if fi.Size() == 0 {
		rotated := Rotated(l.path)
		if len(rotated) == 0 {
			return &Record{}, 0, nil
		}
		prev, err := os.Open(rotated[len(rotated)-1])
		if err != nil {
			return nil, 0, err
		}
		defer prev.Close()
		r, _, err := lastRecord(prev)
		return r, 0, err
	}
	r, partial, err := lastRecord(f)
	if err != nil {
		return nil, 0, err
	}
	if partial > 0 {
		if err := f.Truncate(fi.Size() - partial); err != nil {
			return nil, 0, fmt.Errorf("audit log: removing an incomplete line: %w", err)
		}
	}
	return r, partial, nil
}

// lastRecord reads the last complete line of f and returns its record,
// with the length of an incomplete line after it.
func lastRecord(f *os.File) (*Record, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	for chunk := int64(8 << 10); ; chunk *= 4 {
		off := max(0, size-chunk)
		buf := make([]byte, size-off)
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return nil, 0, err
		}
		end := bytes.LastIndexByte(buf, '\n')
		if end < 0 && off > 0 {
			continue
		}
		partial := int64(len(buf) - end - 1)
		if end < 0 {
			return &Record{}, partial, nil
		}
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		if start == 0 && off > 0 {
			continue
		}
		r, err := decode(buf[start:end])
		if err != nil {
			return nil, 0, fmt.Errorf("audit log %s: its last record is damaged (%v): run cordon audit verify", f.Name(), err)
		}
		return r, partial, nil
	}
}

// rotate renames the current file to the next numbered one and opens a new
// current file; the chain continues in it.
func (l *Log) rotate() (*os.File, error) {
	n := 1
	if rotated := Rotated(l.path); len(rotated) > 0 {
		n = rotatedNumber(l.path, rotated[len(rotated)-1]) + 1
	}
	if err := l.retire(); err != nil {
		return nil, err
	}
	if err := os.Rename(l.path, fmt.Sprintf("%s.%06d", l.path, n)); err != nil {
		return nil, fmt.Errorf("rotating the audit log: %w", err)
	}
	return os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
}

// Rotated lists the rotated files of the log at path, oldest first.
func Rotated(path string) []string {
	found, _ := filepath.Glob(path + ".[0-9][0-9][0-9][0-9][0-9][0-9]")
	sort.Slice(found, func(i, j int) bool { return rotatedNumber(path, found[i]) < rotatedNumber(path, found[j]) })
	return found
}

func rotatedNumber(path, file string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(file, path+"."))
	return n
}

// Files lists every file of the log at path, oldest first: the rotated
// ones, then the current one.
func Files(path string) []string {
	return append(Rotated(path), path)
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}
