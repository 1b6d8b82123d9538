package capdiff

import (
	"slices"

	"github.com/cordon-sandbox/cordon/internal/cache"
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

// caches compares the caches the agent keeps between its runs: each one
// added is a writable directory that outlives the run, which the next run
// of the agent reads, so an expansion.
func (d *differ) caches(o, n profile.Caches) {
	kinds := func(c profile.Caches) []string {
		ks, _ := cache.Expand(c)
		var out []string
		for _, k := range ks {
			out = append(out, k.Name)
		}
		return out
	}
	old, cur := kinds(o), kinds(n)
	for _, name := range cur {
		if !slices.Contains(old, name) {
			d.add(Expansion, "workspace", "caches", "", name, "the agent keeps its %s cache between runs: written by one run, read by the next", name)
		}
	}
	for _, name := range old {
		if !slices.Contains(cur, name) {
			d.add(Reduction, "workspace", "caches", name, "", "the agent no longer keeps its %s cache between runs", name)
		}
	}
}
