//go:build linux

// Command lean is the sandbox side of cordon, built apart from its command
// line: the init of every sandbox, the cleanup helper beside it, and the
// process that holds a user namespace for an idmapped mount. It imports
// only what they use, so each starts without the packages the rest of
// cordon needs (formats, servers, databases, telemetry). cordon carries it
// inside its own binary (see build.sh) and starts it from a sealed copy in
// memory, with one of wire's hidden arguments.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cordon-sandbox/cordon/internal/nsinit"
	"github.com/cordon-sandbox/cordon/internal/sandbox/cleanup"
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
	case wire.CleanupArg:
		cleanup.Main(os.Args[2:])
	case wire.HoldArg:
		io.Copy(io.Discard, os.Stdin)
	default:
		fmt.Fprintln(os.Stderr, "cordon-sandbox: this program is started by cordon only")
		os.Exit(2)
	}
}
