package capdiff

import (
	"slices"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// toolchains compares the toolchains the sandbox runs from the host: each
// one added is read access to a new host directory (its install prefix,
// wherever the user's PATH resolves it), so an expansion.
func (d *differ) toolchains(o, n profile.Toolchains) {
	what := func(name string) string {
		if name == profile.Auto {
			return "the toolchain of the command each run starts (auto)"
		}
		return "the host's " + name + " toolchain"
	}
	for _, name := range n {
		if !slices.Contains(o, name) {
			d.add(Expansion, "paths", "toolchains", "", name, "%s is bound read-only: its install prefix, as the user's PATH resolves it", what(name))
		}
	}
	for _, name := range o {
		if !slices.Contains(n, name) {
			d.add(Reduction, "paths", "toolchains", name, "", "%s is no longer bound", what(name))
		}
	}
}
