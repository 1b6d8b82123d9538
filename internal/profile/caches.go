package profile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/cache"
)

// Caches names the build and package caches the agent keeps between its
// runs (go, npm, yarn, pip, uv, cargo: see internal/cache), or auto for
// all of them: directories of cordon's state, the agent's own, bound
// read-write into each of its sandboxes, with the toolchain's variable
// (GOCACHE, npm_config_cache, ...) naming each inside. Written as a list
// of names or as the single word auto; resources.cache_size bounds them
// together.
type Caches []string

// UnmarshalYAML reads a list of names, or the scalar auto.
func (c *Caches) UnmarshalYAML(unmarshal func(any) error) error {
	names, err := wordOrList(unmarshal)
	*c = names
	return err
}

func (p *Profile) validateCaches(src *source, bad func(field, format string, args ...any)) {
	known := strings.Join(cache.Names(), ", ")
	seen := map[string]bool{}
	for i, name := range p.Caches {
		field := fmt.Sprintf("caches[%d]", i)
		if len(p.Caches) == 1 && !src.has(field) && src.has("caches") {
			if name != cache.Auto {
				bad("caches", "%q: want a list of caches, such as [go, npm], or auto", name)
			}
			return
		}
		_, ok := cache.Lookup(name)
		switch {
		case name != cache.Auto && !ok:
			bad(field, "unknown cache %q (known: %s, or auto)", name, known)
		case seen[name]:
			bad(field, "%s is listed twice", name)
		}
		seen[name] = true
	}
	if len(p.Caches) > 0 && slices.ContainsFunc(p.Mounts, func(m Mount) bool { return cache.Overlaps(m.Dest()) }) {
		bad("caches", "the caches appear inside at %s, which a mount covers or shares; remove the mount or the caches", cache.Inside)
	}
}
