// Package journal records what cordon makes on the host for its sandboxes
// before it makes it (cgroups, the placeholders of protected paths), so
// that whatever ends cordon, a later cordon removes it. There is no
// process beside a sandbox to clean up after it: each cordon process
// writes one file in the journal directory, under its state, and holds an
// exclusive lock on it for as long as it lives; a file nobody holds is one
// whose writer is gone. Sweep, called by any later cordon (run, serve,
// doctor), takes each such file, kills what is left in its cgroups and
// removes them, then removes its placeholders where each is still as cordon
// made it and no sandbox holds it (protect.Sweep), then the file.
//
// A record is one JSON line: {"id": ID, "cgroups": [DIR...]} before the
// cgroups are made, {"id": ID, "placeholder": TOKEN} just before and as
// soon as each placeholder is made (see protect.Options.Made), and
// {"id": ID, "done": true} once cordon removed them itself. The journal
// is cordon's: it is never in the view of the sandbox whose records it
// holds. Another sandbox's view may hold
// the same directory (a profile that binds /tmp or the state directory
// writable), so Sweep takes a file for no more than what cordon itself
// makes: it reads only the user's own files in a directory of the user's
// own, acts only on cgroups named as cordon names the writer's (under
// /sys/fs/cgroup, cordon-PID-N for the file's PID, when no process has
// that pid), and on placeholders only as protect.Sweep takes a token (an
// empty directory, or a file with cordon's content).
package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// Journal is this process's file in one journal directory: made at the
// first record, removed once every sandbox that has records is done (a
// process that makes nothing on the host leaves no file), and made again
// with only the records of the sandboxes not done when those done fill
// most of it (cordon serve keeps sandboxes alive for as long as it runs).
type Journal struct {
	dir  string
	mu   sync.Mutex
	f    *os.File
	path string
	// live has the records (lines) of each sandbox not done, by id;
	// size is the file's, liveSize theirs.
	live           map[string][][]byte
	size, liveSize int64
	next           uint64
}

// compactAt is the size past which a file is made again with only the
// records of sandboxes not done, once they are less than half of it.
const compactAt = 1 << 20

// record is one line of a journal file.
type record struct {
	ID          string   `json:"id"`
	Cgroups     []string `json:"cgroups,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Done        bool     `json:"done,omitempty"`
}

// Process is this process's journal in dir (a directory of cordon's state,
// outside every sandbox's view): one per directory, for the process's
// life.
func Process(dir string) *Journal {
	processes.Lock()
	defer processes.Unlock()
	j := processes.by[dir]
	if j == nil {
		j = &Journal{dir: dir, live: map[string][][]byte{}}
		processes.by[dir] = j
	}
	return j
}

var processes = struct {
	sync.Mutex
	by map[string]*Journal
}{by: map[string]*Journal{}}

// New returns the id of a new sandbox's records; nothing is written until
// its first record.
func (j *Journal) New() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	return strconv.FormatUint(j.next, 10)
}

// Cgroups records, before they are made, the cgroup directories of the
// sandbox id.
func (j *Journal) Cgroups(id string, dirs []string) error {
	return j.write(record{ID: id, Cgroups: dirs})
}

// Placeholder records a placeholder of the sandbox id as it is made.
func (j *Journal) Placeholder(id, token string) error {
	return j.write(record{ID: id, Placeholder: token})
}

// Done records that cordon removed what the sandbox id had made; once no
// sandbox of the process has anything left, the file goes.
func (j *Journal) Done(id string) {
	j.write(record{ID: id, Done: true})
}

// write appends one record: in the page cache before it returns, so that a
// cordon killed after it leaves it for the next one (a host that loses
// power loses the cgroups with it; a placeholder may then stay).
func (j *Journal) write(r record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	lines, live := j.live[r.ID]
	if r.Done && !live {
		return nil // nothing was recorded
	}
	if j.f == nil {
		if err := j.open(); err != nil {
			return err
		}
		j.size = 0
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	line := append(b, '\n')
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.size += int64(len(line))
	if !r.Done {
		j.live[r.ID] = append(lines, line)
		j.liveSize += int64(len(line))
		return nil
	}
	delete(j.live, r.ID)
	for _, l := range lines {
		j.liveSize -= int64(len(l))
	}
	switch {
	case len(j.live) == 0:
		os.Remove(j.path)
		j.f.Close()
		j.f = nil
	case j.size > compactAt && j.size > 2*j.liveSize:
		j.compact()
	}
	return nil
}

// compact makes the file again with only the records of the sandboxes not
// done, then removes the old one: whenever cordon dies, one file or both
// (the same records twice, which a sweep takes as once) name all it made.
// j.mu is held; on an error the old file stays.
func (j *Journal) compact() {
	old, oldPath := j.f, j.path
	if err := j.open(); err != nil {
		j.f, j.path = old, oldPath
		return
	}
	ids := make([]uint64, 0, len(j.live))
	for id := range j.live {
		n, _ := strconv.ParseUint(id, 10, 64)
		ids = append(ids, n)
	}
	slices.Sort(ids)
	var buf []byte
	for _, n := range ids {
		for _, l := range j.live[strconv.FormatUint(n, 10)] {
			buf = append(buf, l...)
		}
	}
	if _, err := j.f.Write(buf); err != nil {
		os.Remove(j.path)
		j.f.Close()
		j.f, j.path = old, oldPath
		return
	}
	os.Remove(oldPath)
	old.Close()
	j.size = int64(len(buf))
}

// open makes a new file of the process and locks it; j.mu is held. The
// file is made under a name a sweep does not read (NAME.new) and given its
// name once locked: a sweep never finds it unlocked while its writer
// lives (it would otherwise take the lock first, and the writer fail).
func (j *Journal) open() error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	start, _ := startTime(os.Getpid())
	name := filepath.Join(j.dir, fmt.Sprintf("%d-%d-%d%s", os.Getpid(), start, time.Now().UnixNano(), suffix))
	fd, err := unix.Open(name+newSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		err = os.Rename(name+newSuffix, name)
	}
	if err != nil {
		unix.Close(fd)
		os.Remove(name + newSuffix)
		return fmt.Errorf("journal: %w", err)
	}
	j.f, j.path = os.NewFile(uintptr(fd), name), name
	return nil
}

// suffix ends the name of a journal file; newSuffix follows it while the
// file is being made (one its writer died making is empty, and goes).
const suffix, newSuffix = ".jsonl", ".new"

// Left is what one sandbox of a gone process left, as a journal says.
type Left struct {
	File         string   `json:"file"`
	Cgroups      []string `json:"cgroups,omitempty"`
	Placeholders int      `json:"placeholders,omitempty"`
}

// Pending lists what the files of gone processes in dir name, without
// removing anything (cordon doctor).
func Pending(dir string) ([]Left, error) {
	var out []Left
	err := eachGone(dir, func(name string, pid int, start uint64, sandboxes []*sandbox) bool {
		for _, s := range sandboxes {
			if ours(s.cgroups, pid) {
				out = append(out, Left{File: name, Cgroups: existing(s.cgroups), Placeholders: places(s.placeholders)})
			}
		}
		return false
	})
	return out, err
}

// Sweep removes what the files of gone processes in dir name, and the
// files: for each sandbox, the cgroups (what is left in them killed first)
// and then its placeholders. A sandbox whose cgroups cannot be removed by
// deadline is kept for the next sweep, its placeholders with it, and so
// is one whose cgroups are there while a process has the writer's pid
// again (its cgroups may be that process's, if the file is not what the
// writer wrote). It returns what it removed.
func Sweep(dir string, deadline time.Time) ([]Left, error) {
	var out []Left
	err := eachGone(dir, func(name string, pid int, start uint64, sandboxes []*sandbox) bool {
		all := true
		for _, s := range sandboxes {
			if !ours(s.cgroups, pid) {
				continue // not cordon's to remove: the record is dropped
			}
			made := existing(s.cgroups)
			if len(made) > 0 && another(pid, start) {
				all = false
				continue
			}
			if !reclaim(s.cgroups, deadline) {
				all = false
				continue
			}
			if n := protect.Sweep(s.placeholders); len(made) > 0 || n > 0 {
				out = append(out, Left{File: name, Cgroups: made, Placeholders: n})
			}
		}
		return all
	})
	return out, err
}

// places counts the paths that tokens name (each placeholder is named
// before it is made, and again once made).
func places(tokens []string) int {
	seen := map[string]bool{}
	for _, t := range tokens {
		if f := strings.SplitN(t, ":", 3); len(f) == 3 {
			seen[f[0]+":"+f[1]] = true
		}
	}
	return len(seen)
}

// existing lists the directories that are there (cordon records a
// cgroup before making it, and may not make it: one not delegated).
func existing(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// another reports whether the pid is now another process's than the
// writer's, which started at start (and may linger as a zombie).
func another(pid int, start uint64) bool {
	now, _, ok := procStat(pid)
	return ok && now != start
}

// sandbox is what one sandbox's records say is left.
type sandbox struct {
	cgroups, placeholders []string
}

// maxFile bounds what is read of one journal file: the records of
// thousands of sandboxes alive at once fit many times over (a file is made
// again without those done, see compact).
const maxFile = 64 << 20

// eachGone calls f with each file of dir that no process holds, the pid
// and start time of its writer, and the sandboxes it names not done, holding the file's
// lock meanwhile; when f returns true, the file is removed. dir must be
// the user's own directory, closed to others' writes; only the user's own
// regular files in it, of one name each, are read, a writer's that lives
// not even locked.
func eachGone(dir string, f func(name string, pid int, start uint64, sandboxes []*sandbox) bool) error {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("journal: %s: %w", dir, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("journal: %s is not a directory of this user's own, closed to others (owner %d, mode %#o): not swept", dir, st.Uid, st.Mode&0o7777)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("journal: %s: %w", dir, err)
	}
	var errs []error
	for _, n := range names {
		pid, start, ok := writer(n)
		if !ok || alive(pid, start) {
			// Not a journal file, or its writer lives (or is still closing
			// its files: the locks it holds on its placeholders among them).
			continue
		}
		fd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone since: its writer removed it
		}
		var fst unix.Stat_t
		if unix.Fstat(fd, &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG || int(fst.Uid) != os.Geteuid() || fst.Nlink != 1 ||
			unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil || !sameFile(dfd, n, &fst) || alive(pid, start) {
			// Not one cordon wrote, or another sweep has it.
			unix.Close(fd)
			continue
		}
		name := filepath.Join(dir, n)
		file := os.NewFile(uintptr(fd), name)
		sandboxes, err := read(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("journal: %s: %w", name, err))
		}
		// A file over the bounds is not one cordon wrote (see compact):
		// what it names is taken as far as it was read, and it goes.
		if f(name, pid, start, sandboxes) && (err == nil || errors.Is(err, errTooLarge) || errors.Is(err, bufio.ErrTooLong)) {
			unix.Unlinkat(dfd, n, 0)
		}
		file.Close()
	}
	return errors.Join(errs...)
}

// writer parses the name of a journal file, PID-START-NANOS.jsonl (or
// .jsonl.new, while it is made): its writer's pid and start time (in clock
// ticks since boot).
func writer(name string) (pid int, start uint64, ok bool) {
	name, found := strings.CutSuffix(name, suffix)
	if !found {
		if name, found = strings.CutSuffix(name, suffix+newSuffix); !found {
			return 0, 0, false
		}
	}
	f := strings.Split(name, "-")
	if len(f) != 3 || !digits(f[0]) || !digits(f[1]) || !digits(f[2]) {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	return pid, start, err1 == nil && err2 == nil && pid > 0
}

// alive reports whether the process pid that started at start is still
// there with its files open: running, or a zombie leader whose other
// threads are still exiting (the last of them closes the files).
func alive(pid int, start uint64) bool {
	now, zombie, ok := procStat(pid)
	if !ok || now != start {
		return false
	}
	if !zombie {
		return true
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return err == nil && len(tasks) > 1
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// startTime is a process's start time, in clock ticks since boot (the
// 22nd field of /proc/PID/stat), which a pid used again does not share.
func startTime(pid int) (uint64, bool) {
	n, _, ok := procStat(pid)
	return n, ok
}

// procStat reads a process's start time and whether it is a zombie (its
// files all closed).
func procStat(pid int) (start uint64, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, f[0] == "Z" || f[0] == "X", err == nil
}

// sameFile reports whether st is still the file at name in the directory
// dfd: one removed by another sweep between this one's open and its lock
// is done.
func sameFile(dfd int, name string, st *unix.Stat_t) bool {
	var b unix.Stat_t
	return unix.Fstatat(dfd, name, &b, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == b.Dev && st.Ino == b.Ino
}

// read reads a journal file's records into the sandboxes not done, in the
// order they began.
func read(f *os.File) ([]*sandbox, error) {
	by := map[string]*sandbox{}
	var order []string
	sc := bufio.NewScanner(&limited{f: f, left: maxFile})
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue // a line cut short by a kill: what it names was not made
		}
		s := by[r.ID]
		if s == nil {
			s = &sandbox{}
			by[r.ID] = s
			order = append(order, r.ID)
		}
		switch {
		case r.Done:
			delete(by, r.ID)
		case r.Cgroups != nil:
			s.cgroups = append(s.cgroups, r.Cgroups...)
		case r.Placeholder != "":
			s.placeholders = append(s.placeholders, r.Placeholder)
		}
	}
	var out []*sandbox
	for _, id := range order {
		if s := by[id]; s != nil {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

var errTooLarge = errors.New("larger than a journal file may be")

// limited reads at most left bytes of f.
type limited struct {
	f    *os.File
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.f.Read(p)
	l.left -= int64(n)
	return n, err
}

// ours reports whether every directory is one the process pid would
// have made: a clean path under /sys/fs/cgroup whose last name is
// cordon-PID-N (see sandbox.newLimiter).
func ours(dirs []string, pid int) bool {
	prefix := "cordon-" + strconv.Itoa(pid) + "-"
	for _, d := range dirs {
		n, found := strings.CutPrefix(path.Base(d), prefix)
		if !strings.HasPrefix(d, "/sys/fs/cgroup/") || path.Clean(d) != d || !found || !digits(n) {
			return false
		}
	}
	return true
}

// reclaim kills what is left in the cgroups and removes them, until
// deadline (a loaded host may take a while to end what was left).
func reclaim(dirs []string, deadline time.Time) bool {
	for cgroup.Reclaim(dirs) != nil {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// String describes what was left, for a person.
func (l Left) String() string {
	var what []string
	for _, d := range l.Cgroups {
		what = append(what, "cgroup "+d)
	}
	if l.Placeholders > 0 {
		what = append(what, fmt.Sprintf("%d placeholder(s) of protected paths", l.Placeholders))
	}
	if len(what) == 0 {
		what = append(what, "nothing")
	}
	return strings.Join(what, ", ") + " (journal " + filepath.Base(l.File) + ")"
}
