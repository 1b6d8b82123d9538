package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/du"
)

// Store is one agent's caches on the host: ROOT/AGENT.
type Store struct {
	Dir string
}

// Open returns the store of agent's caches under root (a directory of
// cordon's, outside every sandbox's view).
func Open(root, agent string) (Store, error) {
	if agent == "" || agent == "." || agent == ".." || strings.ContainsAny(agent, "/\x00") {
		return Store{}, fmt.Errorf("caches: %q is not an agent's name", agent)
	}
	return Store{Dir: filepath.Join(root, agent)}, nil
}

// dir is where a cache's directory is on the host.
func (s Store) dir(name, dir string) string { return filepath.Join(s.Dir, name, dir) }

// Prepare makes the directories of kinds that do not exist yet and marks
// each cache used now (what Trim clears first is the least recently used).
func (s Store) Prepare(kinds []Kind) error {
	now := time.Now()
	for _, k := range kinds {
		for _, d := range k.Dirs {
			if err := os.MkdirAll(s.dir(k.Name, d.Name), 0o700); err != nil {
				return fmt.Errorf("caches: %w", err)
			}
		}
		if err := os.Chtimes(filepath.Join(s.Dir, k.Name), now, now); err != nil {
			return fmt.Errorf("caches: %w", err)
		}
	}
	return nil
}

// Use measures the agent's caches together, until past b. Caches holding
// what the walk could not see (a tree deeper than it descends, a directory
// closed to it) are past b whatever it counted: nothing else bounds that.
func (s Store) Use(b du.Bound) (du.Use, error) {
	fd, err := openDir(s.Dir)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return du.Use{}, nil
		}
		return du.Use{}, err
	}
	defer unix.Close(fd)
	u, err := du.WalkParallel(fd, walkers, b)
	u.Past = u.Past || u.Unseen > 0
	return u, err
}

// walkers is how many directories a walk of the caches reads at once:
// two where there are two CPUs (a walk is a system call or two an entry;
// a run's end waits for it), keeping the descriptors a walk of a hostile
// tree may hold near what one worker's did (see du.WalkParallel).
var walkers = min(runtime.NumCPU(), 2)

// Bound is the walk bound of caches of size bytes: past size bytes, or past
// one file for each BlockSize bytes of it. 0 is no bound.
func Bound(size int64) du.Bound {
	if size <= 0 {
		return du.Bound{}
	}
	return du.Bound{Bytes: size, Inodes: max(size/BlockSize, 1)}
}

// Entry is one cache of an agent as List finds it.
type Entry struct {
	Agent string    `json:"agent"`
	Name  string    `json:"name"`
	Bytes int64     `json:"bytes"`
	Files int64     `json:"files"`
	Used  time.Time `json:"used"`
	// Leftover marks what an earlier clear could not remove (a sandbox
	// was still writing it); the next clear or trim removes it.
	Leftover bool `json:"leftover,omitempty"`
	// Unmeasured marks a cache holding what cordon could not measure (a
	// tree deeper than it walks, a directory closed to it): Bytes and
	// Files do not count it, and a trim clears it first.
	Unmeasured bool `json:"unmeasured,omitempty"`
}

// List measures each cache of the store, in the catalog's order, then
// what earlier clears left.
func (s Store) List() ([]Entry, error) {
	names, err := readNames(s.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	fd, err := openDir(s.Dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	agent := filepath.Base(s.Dir)
	var out []Entry
	for _, n := range names {
		_, known := Lookup(n)
		left := strings.HasPrefix(n, leftoverPrefix)
		if !known && !left {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("caches: %s: %w", n, err)
		}
		u, err := du.Walk(sub, du.Bound{})
		unix.Close(sub)
		if err != nil {
			return nil, fmt.Errorf("caches: %s: %w", n, err)
		}
		out = append(out, Entry{Agent: agent, Name: n, Bytes: u.Bytes, Files: u.Inodes, Used: time.Unix(st.Mtim.Unix()), Leftover: left, Unmeasured: u.Unseen > 0})
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return order(a.Name) - order(b.Name) })
	return out, nil
}

// order is a cache's place in the catalog; leftovers come last.
func order(name string) int {
	i := slices.IndexFunc(Catalog, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return len(Catalog)
	}
	return i
}

// leftoverPrefix names a cache being removed: renamed aside first, so
// that the next sandbox starts an empty one at once.
const leftoverPrefix = ".cleared-"

// Clear removes the caches named (all, when names is empty) and what
// earlier clears left, returning what each held. A sandbox that still runs
// keeps writing the cache it was given, aside; what it writes there is
// removed by the next clear.
func (s Store) Clear(names []string) ([]Entry, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.clear(names)
}

func (s Store) clear(names []string) ([]Entry, error) {
	s.forget()
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	fd, err := openDir(s.Dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var cleared []Entry
	var errs []error
	for _, en := range entries {
		if !en.Leftover && len(names) > 0 && !slices.Contains(names, en.Name) {
			continue
		}
		aside := en.Name
		if !en.Leftover {
			aside = leftoverPrefix + en.Name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			if err := unix.Renameat(fd, en.Name, fd, aside); err != nil {
				errs = append(errs, fmt.Errorf("caches: %s: %w", en.Name, err))
				continue
			}
		}
		if err := removeAt(fd, aside); err != nil {
			errs = append(errs, fmt.Errorf("caches: %s: %w (left as %s, removed by the next clear)", en.Name, err, filepath.Join(s.Dir, aside)))
		}
		if !en.Leftover {
			cleared = append(cleared, en)
		}
	}
	return cleared, errors.Join(errs...)
}

// Trim clears the caches holding what it could not measure, then the
// least recently used until what is left holds at most size bytes and
// size/BlockSize files (the most recently used last, alone past the size,
// is cleared too).
func (s Store) Trim(size int64) ([]Entry, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	var bytes, files int64
	var live []Entry
	for _, en := range entries {
		bytes, files = bytes+en.Bytes, files+en.Files
		if !en.Leftover {
			live = append(live, en)
		}
	}
	b := Bound(size)
	slices.SortStableFunc(live, func(x, y Entry) int {
		switch {
		case x.Unmeasured == y.Unmeasured:
			return x.Used.Compare(y.Used)
		case x.Unmeasured:
			return -1 // what was not measured goes first, whatever its counts
		}
		return 1
	})
	var names []string
	for _, en := range live {
		if en.Unmeasured {
			names = append(names, en.Name)
			bytes, files = bytes-en.Bytes, files-en.Files
			continue
		}
		if (b.Bytes == 0 || bytes <= b.Bytes) && (b.Inodes == 0 || files <= b.Inodes) {
			break
		}
		names = append(names, en.Name)
		bytes, files = bytes-en.Bytes, files-en.Files
	}
	if len(names) == 0 && len(live) == len(entries) {
		return nil, nil
	}
	if len(names) == 0 {
		names = []string{leftoverPrefix} // only the leftovers: no cache is named so
	}
	return s.clear(names)
}

// lock serialises clears and trims of the store.
func (s Store) lock() (func(), error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("caches: %w", err)
	}
	fd, err := unix.Open(filepath.Join(s.Dir, ".lock"), unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("caches: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("caches: %w", err)
	}
	return func() { unix.Close(fd) }, nil
}

// Agents lists the agents with caches under root.
func Agents(root string) ([]string, error) {
	names, err := readNames(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return names, err
}

// readNames lists a directory of cordon's, sorted.
func readNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// openDir opens a directory of cordon's, refusing a link at its name.
func openDir(dir string) (int, error) {
	return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// recordFile holds, in the store, what the agent's caches held when its
// last run ended (at most): "BYTES FILES".
const recordFile = ".use"

// Record keeps what the caches held when a run ended, for the next run's
// start (see Recorded).
func (s Store) Record(u du.Use) error {
	tmp, err := os.CreateTemp(s.Dir, recordFile+".*")
	if err != nil {
		return fmt.Errorf("caches: %w", err)
	}
	_, err = fmt.Fprintf(tmp, "%d %d\n", u.Bytes, u.Inodes)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.Dir, recordFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("caches: %w", err)
	}
	return nil
}

// Recorded is what the caches held when the agent's last run ended, at
// most; ok is false when nothing is recorded (or a clear forgot it).
func (s Store) Recorded() (u du.Use, ok bool) {
	b, err := os.ReadFile(filepath.Join(s.Dir, recordFile))
	if err != nil {
		return du.Use{}, false
	}
	_, err = fmt.Sscanf(string(b), "%d %d", &u.Bytes, &u.Inodes)
	return u, err == nil && u.Bytes >= 0 && u.Inodes >= 0
}

// forget drops the record: the caches changed under it.
func (s Store) forget() { os.Remove(filepath.Join(s.Dir, recordFile)) }
