package cli

import (
	"github.com/cordon-sandbox/cordon/internal/nsinit"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// Hidden subcommands the cordon binary runs itself with (when it carries
// no lean sandbox program, see sandbox/lean).
const (
	hiddenInit = sandbox.InitArg
	hiddenHold = sandbox.HoldArg
)

func initMain() { nsinit.Main() }
