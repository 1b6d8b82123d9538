package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Executable is a sealed copy of the cordon binary being made in the
// background: the copy is the slowest step on the host side, so the CLI
// starts it before it parses its flags and the profile.
type Executable struct {
	done  chan struct{}
	f     *os.File
	err   error
	close sync.Once
}

// SealExecutable starts preparing what the sandbox's init is started from
// (see sealedSelf).
func SealExecutable() *Executable { return prepare(false) }

// SealedCopy always makes the sealed copy: for a run whose command is
// cordon itself (SelfExec), exec'd inside, where Landlock lets nothing on the
// host's disk outside the view run. One copy may start many sandboxes.
func SealedCopy() *Executable { return prepare(true) }

func prepare(copy bool) *Executable {
	e := &Executable{done: make(chan struct{})}
	go func() {
		e.f, e.err = sealedSelf(copy)
		close(e.done)
	}()
	return e
}

// File waits for the copy.
func (e *Executable) File() (*os.File, error) {
	<-e.done
	return e.f, e.err
}

// Close waits for the copy and releases it; later calls do nothing.
func (e *Executable) Close() {
	e.close.Do(func() {
		if f, _ := e.File(); f != nil {
			f.Close()
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
	fd, err := unix.MemfdCreate("cordon", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // kernels before 6.3 know no MFD_EXEC
		fd, err = unix.MemfdCreate("cordon", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "cordon")
	if err := copyFile(mem, src); err != nil {
		mem.Close()
		return nil, fmt.Errorf("copying own executable: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(mem.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		mem.Close()
		return nil, fmt.Errorf("sealing executable copy: %w", err)
	}
	defer mem.Close()
	return highFD(mem)
}

// rootOwned reports whether f belongs to host root and only root may write
// it.
func rootOwned(f *os.File) bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Uid == 0 && st.Mode&0o022 == 0
}

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
