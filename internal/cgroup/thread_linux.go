package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// StartIn runs start on an OS thread that is, alone, in the group's
// hierarchies, so that the process start forks begins its life in the
// group. Moving a whole process on v1 (AddProcess) waits for an RCU grace
// period, many milliseconds on some hosts; moving the calling thread alone
// (0 written to tasks) does not. The thread goes back to cordon's own
// cgroups before StartIn returns. It reports false, without running start,
// when cordon may not move its threads here (the tasks files not writable).
func (g *v1) StartIn(start func() error) (bool, error) {
	var in, home []*os.File
	defer func() {
		for _, f := range append(in, home...) {
			f.Close()
		}
	}()
	for _, d := range g.Paths() {
		fi, err := os.OpenFile(filepath.Join(d, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			return false, nil
		}
		in = append(in, fi)
		fh, err := os.OpenFile(filepath.Join(filepath.Dir(d), "tasks"), os.O_WRONLY, 0)
		if err != nil {
			return false, nil
		}
		home = append(home, fh)
	}
	var started bool
	var err error
	onOtherThread(func() (keep bool) {
		if !moveThread(in) {
			// Back where it came from, the thread may serve again; if not,
			// it ends with its goroutine.
			return moveThread(home)
		}
		started, err = true, start()
		if !moveThread(home) {
			err = errors.Join(err, fmt.Errorf("moving cordon's thread out of the sandbox's cgroup"))
			return false
		}
		return true
	})
	return started, err
}

// moveThread moves the calling thread into the cgroups whose tasks files
// are open in files.
func moveThread(files []*os.File) bool {
	for _, f := range files {
		if _, err := f.WriteString("0"); err != nil {
			return false
		}
	}
	return true
}

// onOtherThread runs fn on an OS thread locked to it, never the process's
// main thread (whose cgroup decides where the process's memory is
// charged). When fn returns false the thread ends instead of serving other
// goroutines.
func onOtherThread(fn func() bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread stays locked here, so the next goroutine
			// runs on another.
			onOtherThread(fn)
			runtime.UnlockOSThread()
			return
		}
		if fn() {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}
