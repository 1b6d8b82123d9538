//go:build cordon_weaken

package hostfile

import (
	"os"
	"slices"
	"strings"
)

// weak reports whether a test build was told (CORDON_WEAKEN=hostfile) to
// open files the ordinary way, following links and waiting on FIFOs, so
// that the escape probe for it can be shown to fail.
func weak() bool { return slices.Contains(strings.Split(os.Getenv("CORDON_WEAKEN"), ","), "hostfile") }
