package cli

import (
	"github.com/cordon-sandbox/cordon/internal/nsinit"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// Hidden subcommands the cordon binary runs itself with.
const (
	hiddenInit    = sandbox.InitArg
	hiddenHold    = sandbox.HoldArg
	hiddenCleanup = sandbox.CleanupArg
)

func initMain() { nsinit.Main() }

func cleanupMain(dirs []string) { sandbox.Cleanup(dirs) }
