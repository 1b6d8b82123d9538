//go:build !linux

package cli

import (
	"os"

	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

const (
	hiddenInit = sandbox.InitArg
	hiddenHold = sandbox.HoldArg
)

func initMain() { os.Exit(ExitCordon) }
