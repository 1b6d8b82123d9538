//go:build linux

package egress

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// splice relays src to dst in the kernel, through a pipe, when both are TCP
// connections: each read from src is counted, against the byte budget, while
// it is in the pipe, before any of it is written, and only what the budget
// leaves of it is written; then the copy stops, as write's does. handled is
// false when splice cannot carry this pair (nothing has been read then) and
// the caller copies through a buffer instead.
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
	pp, err := getPipe()
	if err != nil {
		return false, nil
	}
	defer pp.release()
	for first := true; ; first = false {
		n, err := pp.fill(rd)
		if err != nil {
			if first && errors.Is(err, unix.EINVAL) {
				return false, nil // not spliceable: nothing was read
			}
			return true, err
		}
		if n == 0 {
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
const pipeSize = 1 << 20

// pipes holds empty pipes for reuse; one dropped by the pool is closed by
// its cleanup.
var pipes sync.Pool

func getPipe() (*kpipe, error) {
	if pp, ok := pipes.Get().(*kpipe); ok {
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
	return pp, nil
}

func closePipe(fds [2]int) {
	unix.Close(fds[0])
	unix.Close(fds[1])
}

// release returns an empty pipe to the pool and closes one that still holds
// bytes.
func (pp *kpipe) release() {
	if pp.data == 0 {
		pipes.Put(pp)
		return
	}
	pp.cleanup.Stop()
	closePipe([2]int{pp.r, pp.w})
}

// fill moves what src has, up to the pipe's size, into the (empty) pipe,
// waiting for src to have something; 0 means src ended.
func (pp *kpipe) fill(src syscall.RawConn) (int, error) {
	var n int64
	var serr error
	err := src.Read(func(fd uintptr) bool {
		for {
			n, serr = unix.Splice(int(fd), nil, pp.w, nil, pp.size, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	pp.data += int(n)
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
