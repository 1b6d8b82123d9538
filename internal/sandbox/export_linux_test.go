package sandbox

import (
	"os"
	"time"
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
	f, err := sealed("cordon", func(dst *os.File) error { return copyFile(dst, src) })
	e := &Executable{done: make(chan struct{}), f: f, self: f, err: err}
	close(e.done)
	return e, err
}

// SetOutputGrace sets outputGrace for a test, and returns what puts it back.
func SetOutputGrace(d time.Duration) (restore func()) {
	old := outputGrace
	outputGrace = d
	return func() { outputGrace = old }
}
