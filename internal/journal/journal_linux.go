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
// cgroups are made, {"id": ID, "placeholder": TOKEN} as each placeholder is
// made (see protect.Options.Made), and {"id": ID, "done": true} once cordon
// removed them itself. The journal is cordon's: it is never in a sandbox's
// view, and Sweep acts only on cgroups cordon names (under
// /sys/fs/cgroup, named cordon-*) and on placeholders as their tokens
// describe them.
package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// process that makes nothing on the host leaves no file).
type Journal struct {
	dir  string
	mu   sync.Mutex
	f    *os.File
	path string
	live map[string]bool // ids with records, not done
	next uint64
}

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
		j = &Journal{dir: dir, live: map[string]bool{}}
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
	if r.Done && !j.live[r.ID] {
		return nil // nothing was recorded
	}
	if j.f == nil {
		if err := j.open(); err != nil {
			return err
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if !r.Done {
		j.live[r.ID] = true
		return nil
	}
	delete(j.live, r.ID)
	if len(j.live) == 0 {
		os.Remove(j.path)
		j.f.Close()
		j.f = nil
	}
	return nil
}

// open makes a new file of the process and locks it; j.mu is held.
func (j *Journal) open() error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	start, _ := startTime(os.Getpid())
	name := filepath.Join(j.dir, fmt.Sprintf("%d-%d-%d.jsonl", os.Getpid(), start, time.Now().UnixNano()))
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		os.Remove(name)
		return fmt.Errorf("journal: %w", err)
	}
	j.f, j.path = os.NewFile(uintptr(fd), name), name
	return nil
}

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
	err := eachGone(dir, func(name string, sandboxes []*sandbox) bool {
		for _, s := range sandboxes {
			out = append(out, Left{File: name, Cgroups: s.cgroups, Placeholders: len(s.placeholders)})
		}
		return false
	})
	return out, err
}

// Sweep removes what the files of gone processes in dir name, and the
// files: for each sandbox, the cgroups (what is left in them killed first)
// and then its placeholders. A sandbox whose cgroups cannot be removed by
// deadline is kept for the next sweep, its placeholders with it. It
// returns what it removed.
func Sweep(dir string, deadline time.Time) ([]Left, error) {
	var out []Left
	err := eachGone(dir, func(name string, sandboxes []*sandbox) bool {
		all := true
		for _, s := range sandboxes {
			if !ours(s.cgroups) {
				continue // not cordon's to remove: the record is dropped
			}
			if !reclaim(s.cgroups, deadline) {
				all = false
				continue
			}
			protect.Sweep(s.placeholders)
			out = append(out, Left{File: name, Cgroups: s.cgroups, Placeholders: len(s.placeholders)})
		}
		return all
	})
	return out, err
}

// sandbox is what one sandbox's records say is left.
type sandbox struct {
	cgroups, placeholders []string
}

// maxFile bounds what is read of one journal file: a process's records of
// thousands of sandboxes (cordon serve) fit many times over.
const maxFile = 64 << 20

// eachGone calls f with each file of dir that no process holds and the
// sandboxes it names not done, holding the file's lock meanwhile; when f
// returns true, the file is removed.
func eachGone(dir string, f func(name string, sandboxes []*sandbox) bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		name := filepath.Join(dir, e.Name())
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue // gone since: its writer removed it
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil || !sameFile(fd, name) || dying(e.Name()) {
			// Its writer lives (or is still closing its files: the locks
			// it holds on its placeholders among them), or another sweep
			// has it.
			unix.Close(fd)
			continue
		}
		file := os.NewFile(uintptr(fd), name)
		sandboxes, err := read(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("journal: %s: %w", name, err))
		}
		if f(name, sandboxes) && err == nil {
			os.Remove(name)
		}
		file.Close()
	}
	return errors.Join(errs...)
}

// dying reports whether the process that wrote the journal file name
// (PID-START-...: its pid, and its start time in clock ticks since boot) is
// still there, its files being closed as it dies.
func dying(name string) bool {
	f := strings.SplitN(name, "-", 3)
	if len(f) < 3 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	now, zombie, ok := procStat(pid)
	return ok && now == start && !zombie
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

// sameFile reports whether fd is still the file at name: one removed by
// another sweep between this one's open and its lock is done.
func sameFile(fd int, name string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Lstat(name, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
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

// limited reads at most left bytes of f.
type limited struct {
	f    *os.File
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errors.New("larger than a journal file may be")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.f.Read(p)
	l.left -= int64(n)
	return n, err
}

// ours reports whether every directory is one cordon made.
func ours(dirs []string) bool {
	for _, d := range dirs {
		if !strings.HasPrefix(d, "/sys/fs/cgroup/") || !strings.Contains(d, "/cordon-") || strings.Contains(d, "/../") || strings.Contains(d, "/./") {
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
