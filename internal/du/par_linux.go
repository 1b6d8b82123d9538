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
// that, a worker descends into what it finds itself, as Walk does, so
// that a tree of any breadth holds a bounded number of descriptors
// (maxQueued, and MaxDepth+1 for each worker). A directory removed while
// it waits was empty, and counts as such. Past its bound it stops as
// soon as each worker sees so: its counts may then go a few entries
// further than Walk's.
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

// par is one parallel walk: its counts, shared by its workers, and the
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
	w := &walk{buf: make([]byte, 32<<10)}
	for q := range p.queue {
		if !p.stop.Load() {
			if err := p.dir(w, q.fd, q.depth); err != nil {
				p.fail(err)
			}
		} else {
			unix.Close(q.fd)
		}
		p.pending.Done()
	}
}

// dir counts what the directory fd holds (and closes it), as walk.dir
// does, handing the directories it finds to other workers while the queue
// has room.
func (p *par) dir(w *walk, fd, depth int) error {
	defer unix.Close(fd)
	subdirs, err := w.list(fd, depth, func(st *unix.Stat_t) bool {
		p.inodes.Add(1)
		p.bytes.Add(st.Blocks * 512)
		return p.past() || p.stop.Load()
	}, func() { p.unseen.Add(1) })
	if err != nil {
		return err
	}
	for _, name := range subdirs {
		if p.stop.Load() {
			return errPast
		}
		sub, ok := w.open(fd, name, func() { p.unseen.Add(1) })
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
		if err := p.dir(w, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}
