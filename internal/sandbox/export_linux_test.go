package sandbox

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ExecutableAt is a sealed in-memory copy of the cordon binary at path, to
// start sandboxes from in tests: the test binary itself, built with cgo
// for the race detector, cannot be the sandbox's init.
func ExecutableAt(path string) (*Executable, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	fd, err := unix.MemfdCreate("cordon", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("cordon", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "cordon")
	defer mem.Close()
	if err := copyFile(mem, src); err != nil {
		return nil, fmt.Errorf("copying %s: %w", path, err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(mem.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("sealing the copy of %s: %w", path, err)
	}
	f, err := highFD(mem)
	e := &Executable{done: make(chan struct{}), f: f, err: err}
	close(e.done)
	return e, err
}

// SetOutputGrace sets outputGrace for a test, and returns what puts it back.
func SetOutputGrace(d time.Duration) (restore func()) {
	old := outputGrace
	outputGrace = d
	return func() { outputGrace = old }
}
