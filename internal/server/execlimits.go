package server

import (
	"fmt"
	"net/http"

	"github.com/cordon-sandbox/cordon/internal/api"
)

// Caps of a command's argv, environment and directory: what execve(2)
// could not take anyway, refused (413) before anything is recorded or
// run, so that an oversized request writes no oversized record.
const (
	// maxArgs and maxEnv bound the number of arguments and variables.
	maxArgs = 4096
	maxEnv  = 1024
	// maxArgBytes bounds one argument, or one variable (NAME=value): the
	// kernel's MAX_ARG_STRLEN.
	maxArgBytes = 128 << 10
	// maxDirBytes bounds the working directory: PATH_MAX.
	maxDirBytes = 4096
	// maxCommandBytes bounds argv, the environment and the directory
	// together (each string with its terminating NUL): half the kernel's
	// usual ARG_MAX of 2 MiB.
	maxCommandBytes = 1 << 20
)

// checkSize refuses a command over the caps above.
func checkSize(req api.ExecRequest) error {
	tooLarge := func(format string, args ...any) error {
		return &bodyError{http.StatusRequestEntityTooLarge, fmt.Errorf(format, args...)}
	}
	if len(req.Args) > maxArgs {
		return tooLarge("args: %d arguments, over the cap of %d", len(req.Args), maxArgs)
	}
	if len(req.Env) > maxEnv {
		return tooLarge("env: %d variables, over the cap of %d", len(req.Env), maxEnv)
	}
	if len(req.Dir) > maxDirBytes {
		return tooLarge("dir: %d bytes, over the cap of %d", len(req.Dir), maxDirBytes)
	}
	total := len(req.Dir) + 1
	for i, a := range req.Args {
		if len(a)+1 > maxArgBytes {
			return tooLarge("args[%d]: %d bytes, over the cap of %d for one argument", i, len(a), maxArgBytes-1)
		}
		total += len(a) + 1
	}
	for k, v := range req.Env {
		if n := len(k) + len(v) + 2; n > maxArgBytes {
			return tooLarge("env: the variable %.64q is %d bytes, over the cap of %d for one variable", k, n-1, maxArgBytes-1)
		}
		total += len(k) + len(v) + 2
	}
	if total > maxCommandBytes {
		return tooLarge("args, env and dir: %d bytes together, over the cap of %d", total, maxCommandBytes)
	}
	return nil
}
