//go:build linux

// Command lean is the sandbox side of cordon, built apart from its command
// line: the init of every sandbox, and the process that holds a user
// namespace for an idmapped mount. It imports
// only what they use, so each starts without the packages the rest of
// cordon needs (formats, servers, databases, telemetry). cordon carries it
// inside its own binary (see build.sh) and starts it from a sealed copy in
// memory, with one of wire's hidden arguments.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/nsinit"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

func main() {
	arg := ""
	if len(os.Args) > 1 {
		arg = os.Args[1]
	}
	switch arg {
	case wire.InitArg:
		nsinit.Main()
	case wire.HoldArg:
		name("cordon-hold")
		io.Copy(io.Discard, os.Stdin)
	default:
		fmt.Fprintln(os.Stderr, "cordon-sandbox: this program is started by cordon only")
		os.Exit(2)
	}
}

// name names the process for ps and top: started from a descriptor, it
// would otherwise be called by the descriptor's number.
func name(n string) {
	b := append([]byte(n), 0)
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0)
	runtime.KeepAlive(b)
}
