package du

import (
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// WalkParallel is Walk with up to workers directories read at once: a
// walk costs a system call or two for every entry, and on a host of
// several cores they need not wait for each other. The directories
// waiting for a worker are held open, at most maxQueued of them: past
// that, a worker descends into what it finds itself, so that a tree of
// any breadth holds a bounded number of descriptors (maxQueued, and
// MaxDepth+1 for each worker). Past its bound it stops as soon as each
// worker sees so: with more than one worker, its counts may then go a few
// entries past the first one beyond the bound.
func WalkParallel(dirfd, workers int, b Bound) (Use, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Use{}, err
	}
	p := &par{bound: b, queue: make(chan queued, maxQueued)}
	p.pending.Add(1)
	p.queue <- queued{fd, 0}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work()
		}()
	}
	p.pending.Wait()
	close(p.queue)
	wg.Wait()
	u := Use{Bytes: p.bytes.Load(), Inodes: p.inodes.Load(), Unseen: p.unseen.Load()}
	u.Past = p.past()
	p.mu.Lock()
	err = p.err
	p.mu.Unlock()
	if errors.Is(err, errPast) {
		err = nil
	}
	return u, err
}

// maxQueued bounds the directories a parallel walk holds open waiting.
const maxQueued = 64

// queued is a directory, open, waiting for a worker.
type queued struct{ fd, depth int }

// par is one walk: its counts, shared by its workers, and the
// directories waiting. pending counts those queued and not yet walked.
type par struct {
	bound                 Bound
	bytes, inodes, unseen atomic.Int64
	queue                 chan queued
	pending               sync.WaitGroup
	stop                  atomic.Bool
	mu                    sync.Mutex
	err                   error
}

func (p *par) past() bool {
	return p.bound.Bytes > 0 && p.bytes.Load() > p.bound.Bytes || p.bound.Inodes > 0 && p.inodes.Load() > p.bound.Inodes
}

// fail ends the walk with err, the first one kept.
func (p *par) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.stop.Store(true)
}

// work walks queued directories until the queue is closed.
func (p *par) work() {
	buf := make([]byte, 32<<10)
	for q := range p.queue {
		if !p.stop.Load() {
			if err := p.dir(buf, q.fd, q.depth); err != nil {
				p.fail(err)
			}
		} else {
			unix.Close(q.fd)
		}
		p.pending.Done()
	}
}

// dir counts what the directory fd holds (and closes it), handing the
// directories it finds to other workers while the queue has room and
// descending into the rest itself.
func (p *par) dir(buf []byte, fd, depth int) error {
	defer unix.Close(fd)
	subdirs, err := p.list(buf, fd, depth)
	if err != nil {
		return err
	}
	for _, name := range subdirs {
		if p.stop.Load() {
			return errPast
		}
		sub, ok := p.open(fd, name)
		if !ok {
			continue
		}
		p.pending.Add(1)
		select {
		case p.queue <- queued{sub, depth + 1}:
			continue
		default:
			p.pending.Done()
		}
		if err := p.dir(buf, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// list counts the entries of the directory fd, read through buf, and
// returns the names of the directories to enter; errPast once the walk is
// past its bound or stopped.
func (p *par) list(buf []byte, fd, depth int) ([]string, error) {
	var subdirs []string
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.ENOENT) {
			// Removed since it was opened (a directory is removed
			// only when empty): it holds nothing.
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return subdirs, nil
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if !errors.Is(err, unix.ENOENT) {
					p.unseen.Add(1) // in a directory closed to search (chmod 444)
				}
				continue // or gone since: the sandbox is still writing
			}
			p.inodes.Add(1)
			p.bytes.Add(st.Blocks * 512)
			if p.past() || p.stop.Load() {
				return nil, errPast
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			if depth < MaxDepth {
				subdirs = append(subdirs, name)
			} else {
				p.unseen.Add(1)
			}
		}
	}
}

// open opens the directory name beneath fd, following nothing; false when
// it is gone, is no longer a directory (replaced by a file or a link), or
// cannot be opened (then it is unseen).
func (p *par) open(fd int, name string) (int, bool) {
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP):
		return 0, false // gone, or replaced by a file or a link since
	case err != nil:
		p.unseen.Add(1) // unreadable
		return 0, false
	}
	return sub, true
}
