package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Executable is what the sandbox's init is started from, made ready in the
// background: the copy is the slowest step on the host side, so the CLI
// starts it before it parses its flags and the profile. It is the lean
// sandbox program when cordon carries one (see package sandbox/lean),
// else cordon itself.
type Executable struct {
	done chan struct{}
	f    *os.File
	// self is cordon itself, sealed, for runs whose command is cordon
	// (SelfExec); with the lean program, made only when asked for.
	self  *os.File
	err   error
	close sync.Once
}

// SealExecutable starts preparing what the sandbox's init is started from
// (see sealedSelf).
func SealExecutable() *Executable { return prepare(false) }

// SealedCopy also makes a sealed copy of cordon itself: for a run whose
// command is cordon (SelfExec), exec'd inside, where Landlock lets nothing
// on the host's disk outside the view run, and for kept-alive sandboxes,
// whose requests may be such runs. One copy may start many sandboxes.
func SealedCopy() *Executable { return prepare(true) }

func prepare(copy bool) *Executable {
	e := &Executable{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		// Without the lean program, or where the host forbids running
		// one from memory (vm.memfd_noexec), init is cordon itself.
		switch lean, err := leanHelper(); {
		case err != nil || lean == nil:
			e.f, e.err = sealedSelf(copy)
			e.self = e.f
		default:
			if e.f, e.err = highFD(lean); e.err == nil && copy {
				e.self, e.err = sealedSelf(true)
			}
		}
	}()
	return e
}

// File waits for what init is started from.
func (e *Executable) File() (*os.File, error) {
	<-e.done
	return e.f, e.err
}

// Self waits for cordon's own sealed copy; nil unless made with
// SealedCopy (or when init is cordon itself).
func (e *Executable) Self() *os.File {
	<-e.done
	return e.self
}

// Close waits for the copies and releases them; later calls do nothing.
func (e *Executable) Close() {
	e.close.Do(func() {
		<-e.done
		if e.self != nil && e.self != e.f {
			e.self.Close()
		}
		if e.f != nil {
			e.f.Close()
		}
	})
}

// sealedSelf returns what the sandbox's init is started from: a file that
// no process in the sandbox can write, so that one reaching the init's
// executable (/proc/1/exe) cannot overwrite cordon (CVE-2019-5736). That is
// the binary itself when host root owns it and nobody else may write it (the
// sandbox user is never host root): it is then shared, in the page cache,
// by every sandbox. Otherwise (a binary the user owns, run rootless, would
// be the sandbox user's own file) it is a sealed in-memory copy.
func sealedSelf(copy bool) (*os.File, error) {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("opening own executable: %w", err)
	}
	defer src.Close()
	if !copy && rootOwned(src) {
		return highFD(src)
	}
	return sealed("cordon", func(dst *os.File) error { return copyFile(dst, src) })
}

// sealed is a sealed in-memory file named name, filled by fill: no process
// can write, grow or shrink it once sealed.
func sealed(name string, fill func(*os.File) error) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // kernels before 6.3 know no MFD_EXEC
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), name)
	defer mem.Close()
	if err := fill(mem); err != nil {
		return nil, fmt.Errorf("copying %s into memory: %w", name, err)
	}
	if err := seal(mem); err != nil {
		return nil, fmt.Errorf("sealing %s: %w", name, err)
	}
	return highFD(mem)
}

// seal seals mem against every change. The kernel refuses the write seal
// (EBUSY) while a page of the file has a reference besides its mappings,
// after waiting about 75 ms for it to go: one taken in passing by the
// kernel itself (on a host under load, the copy's pages can be held that
// long), so the seal is tried again, sealTries times in all, a little
// later each time.
func seal(mem *os.File) error {
	const seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	for try := 1; ; try++ {
		_, err := addSeals(int(mem.Fd()), seals)
		if !errors.Is(err, unix.EBUSY) || try == sealTries {
			return err
		}
		time.Sleep(time.Duration(10<<(try-1)) * time.Millisecond)
	}
}

// sealTries bounds seal's attempts; addSeals is fcntl(F_ADD_SEALS), a
// variable for tests.
const sealTries = 5

var addSeals = func(fd, seals int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals) }

// rootOwned reports whether f belongs to host root and only root may write
// it.
func rootOwned(f *os.File) bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && rootOnly(&st)
}

// rootOnly reports whether st is host root's, and only root may write it.
func rootOnly(st *unix.Stat_t) bool { return st.Uid == 0 && st.Mode&0o022 == 0 }

// highFD duplicates f clear of the low numbers the child's descriptors are
// moved to before exec.
func highFD(f *os.File) (*os.File, error) {
	high, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 100)
	if err != nil {
		return nil, fmt.Errorf("moving executable descriptor: %w", err)
	}
	return os.NewFile(uintptr(high), "cordon"), nil
}

// copyFile copies src to dst inside the kernel.
func copyFile(dst, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	for left := fi.Size(); left > 0; {
		n, err := unix.Sendfile(int(dst.Fd()), int(src.Fd()), nil, int(min(left, 1<<30)))
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		left -= int64(n)
	}
	return nil
}
