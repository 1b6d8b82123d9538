//go:build cordon_weaken

package sandbox

import (
	"os"
	"strings"
	"syscall"
)

// weakened reports whether a test build was asked, through CORDON_WEAKEN,
// to go without a layer, so that the escape probes can be shown to fail.
// Only binaries built with the cordon_weaken tag have this switch.
func weakened(layer string) bool { return Weakened(layer) }

// Weakened is weakened, for the probe command.
func Weakened(layer string) bool {
	for _, l := range strings.Split(os.Getenv("CORDON_WEAKEN"), ",") {
		if l == layer {
			return true
		}
	}
	return false
}

// anyWeakened reports whether any layer is left out: the drift check then
// does not judge the processes' confinement, which is weakened on purpose.
func anyWeakened() bool { return os.Getenv("CORDON_WEAKEN") != "" }

// dieAt kills cordon with SIGKILL at the stage of building or ending a
// sandbox that CORDON_DIE_AT names, as a test build's way to show that
// whatever moment cordon dies, the next one removes what it made.
func dieAt(stage string) {
	if os.Getenv("CORDON_DIE_AT") == stage {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
