package sandbox

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The write seal the kernel refuses while a page is held in passing
// (EBUSY) is tried again; a refusal that lasts, or any other, is the
// copy's failure, and nothing unsealed is handed on.
func TestSealTriesAgainWhileBusy(t *testing.T) {
	real := addSeals
	t.Cleanup(func() { addSeals = real })
	fill := func(f *os.File) error { _, err := f.WriteString("#!/bin/sh\n"); return err }

	busy := 2
	addSeals = func(fd, seals int) (int, error) {
		if busy > 0 {
			busy--
			return 0, unix.EBUSY
		}
		return real(fd, seals)
	}
	f, err := sealed("x", fill)
	if err != nil {
		t.Fatalf("busy twice, then sealed: %v", err)
	}
	defer f.Close()
	if got, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || got&unix.F_SEAL_WRITE == 0 {
		t.Fatalf("seals %#x, %v; want the write seal", got, err)
	}
	if _, err := f.WriteString("x"); err == nil {
		t.Fatal("a sealed copy took a write")
	}

	calls := 0
	addSeals = func(int, int) (int, error) { calls++; return 0, unix.EBUSY }
	if f, err := sealed("x", fill); err == nil || !errors.Is(err, unix.EBUSY) || calls != sealTries {
		t.Fatalf("always busy: %v, %v after %d tries; want EBUSY after %d", f, err, calls, sealTries)
	}
	calls = 0
	addSeals = func(int, int) (int, error) { calls++; return 0, unix.EPERM }
	if _, err := sealed("x", fill); !errors.Is(err, unix.EPERM) || calls != 1 {
		t.Fatalf("refused: %v after %d tries; want EPERM at once", err, calls)
	}
}
