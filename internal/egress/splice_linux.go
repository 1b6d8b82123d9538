//go:build linux

package egress

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// splice relays src to dst in the kernel, through a pipe, when both are TCP
// connections: each read from src is counted, against the byte budget, while
// it is in the pipe, before any of it is written, and only what the budget
// leaves of it is written; then the copy stops, as write's does. A pipe is
// held only while bytes move: a relay waiting for src holds none. handled
// is false when splice cannot carry this pair (or no pipe can be had) and
// the caller copies through a buffer from where splice stopped: nothing is
// in a pipe then.
func (t *tunnel) splice(dst, src net.Conn, out bool) (handled bool, err error) {
	s, ok := src.(*net.TCPConn)
	d, ok2 := dst.(*net.TCPConn)
	if !ok || !ok2 {
		return false, nil
	}
	rd, err := s.SyscallConn()
	if err != nil {
		return false, nil
	}
	wr, err := d.SyscallConn()
	if err != nil {
		return false, nil
	}
	var pp *kpipe
	defer func() {
		if pp != nil {
			pp.release()
		}
	}()
	for {
		n, err := fill(rd, &pp)
		switch {
		case errors.Is(err, errNoPipe), err == unix.EINVAL:
			return false, nil // nothing was read, nothing is in a pipe
		case err != nil:
			return true, err
		case n == 0:
			return true, nil // src ended
		}
		t.touch()
		if allowed := t.count(int64(n), out); allowed > 0 {
			if err := pp.drain(wr, int(allowed)); err != nil {
				return true, err
			}
			t.touch()
		}
		// What the budget did not leave stays in the pipe, which is
		// then closed rather than reused.
		if err := t.budgetLeft(); err != nil {
			return true, err
		}
	}
}

// kpipe is a pipe the kernel moves a tunnel's bytes through; data is how
// many bytes it holds.
type kpipe struct {
	r, w    int
	size    int
	data    int
	cleanup runtime.Cleanup
}

// pipeSize is the capacity asked of each pipe: the most one splice moves.
// Pipes count against their user's pipe pages (fs.pipe-user-pages-soft),
// which the sandbox's processes may share: a relay holds one only while it
// moves bytes.
const pipeSize = 256 << 10

// pipes holds empty pipes for reuse; one dropped by the pool is closed by
// its cleanup. held is how many relays hold one.
var (
	pipes sync.Pool
	held  atomic.Int64
)

func getPipe() (*kpipe, error) {
	if pp, ok := pipes.Get().(*kpipe); ok {
		held.Add(1)
		return pp, nil
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, pipeSize) // a smaller pipe serves too
	size, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETPIPE_SZ, 0)
	if err != nil || size <= 0 {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, errors.New("the pipe's size is unknown")
	}
	pp := &kpipe{r: fds[0], w: fds[1], size: size}
	pp.cleanup = runtime.AddCleanup(pp, closePipe, fds)
	held.Add(1)
	return pp, nil
}

func closePipe(fds [2]int) {
	unix.Close(fds[0])
	unix.Close(fds[1])
}

// release returns an empty pipe to the pool and closes one that still holds
// bytes.
func (pp *kpipe) release() {
	held.Add(-1)
	if pp.data == 0 {
		pipes.Put(pp)
		return
	}
	pp.cleanup.Stop()
	closePipe([2]int{pp.r, pp.w})
}

// errNoPipe is what fill gets when no pipe can be had.
var errNoPipe = errors.New("no pipe")

// fill waits for src to have something to read, then moves what it has, up
// to a pipe's size, into *pp (empty), taken from the pool only then: while
// it waits, the relay holds no pipe. 0 means src ended. The attempts and
// the waits between them are one RawConn.Read, which sees every readiness
// notice that comes after its first attempt.
func fill(src syscall.RawConn, pp **kpipe) (int, error) {
	var n int64
	var serr error
	err := src.Read(func(fd uintptr) bool {
		if *pp == nil {
			p, err := getPipe()
			if err != nil {
				serr = errNoPipe
				return true
			}
			*pp = p
		}
		for {
			n, serr = unix.Splice(int(fd), nil, (*pp).w, nil, (*pp).size, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch serr {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				// Nothing to read yet: the empty pipe goes back
				// while src is waited for.
				(*pp).release()
				*pp = nil
				return false
			}
			return true
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	(*pp).data += int(n)
	return int(n), nil
}

// drain writes the first n bytes the pipe holds to dst, waiting for dst to
// take them.
func (pp *kpipe) drain(dst syscall.RawConn, n int) error {
	var serr error
	err := dst.Write(func(fd uintptr) bool {
		for n > 0 {
			m, err := unix.Splice(pp.r, nil, int(fd), nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false
			case err != nil:
				serr = err
				return true
			case m == 0:
				serr = errors.New("the pipe ended before its bytes were written")
				return true
			}
			n -= int(m)
			pp.data -= int(m)
		}
		return true
	})
	if err == nil {
		err = serr
	}
	return err
}
