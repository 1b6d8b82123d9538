package cli

import (
	"github.com/cordon-sandbox/cordon/internal/nsinit"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// Hidden subcommands the cordon binary runs itself with.
const (
	hiddenInit = sandbox.InitArg
	hiddenHold = sandbox.HoldArg
)

func initMain() { nsinit.Main() }
