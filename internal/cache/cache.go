// Package cache keeps an agent's build and package caches between its
// runs: Go's build and module caches, npm's, yarn's, pip's, uv's and
// cargo's, each a directory of cordon's state bound read-write into the
// agent's sandboxes, with the toolchain's environment variable naming it
// inside. They are the agent's own, never the host's: a sandbox that
// wrote the host's build cache could plant objects that the host's next
// build links.
//
// On the host, an agent's caches are ROOT/AGENT/NAME/DIR: ROOT is cordon's
// (outside every sandbox's view), AGENT and NAME are made by cordon, and
// only each DIR is seen inside, at Inside/NAME/DIR. Everything within a DIR
// was written by a sandbox: cordon measures it and removes it without
// following anything (package du, and remove.go), and never runs or reads
// what is in it.
package cache

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Inside is where the caches appear inside a sandbox.
const Inside = "/var/cache/cordon"

// Overlaps reports whether a bind at target inside would cover the caches
// (Inside), lie within them, or be the place itself.
func Overlaps(target string) bool {
	return target == Inside || strings.HasPrefix(target, Inside+"/") || strings.HasPrefix(Inside, target+"/")
}

// Kind is one cache cordon knows: the directories it keeps, each named
// inside by environment variables.
type Kind struct {
	Name string
	Dirs []Dir
	Doc  string
	// Offline are variables (NAME=VALUE) set when the sandbox reaches no
	// network: the tool then works from the cache without asking a
	// registry that cannot answer (npm retries for minutes first).
	Offline []string
}

// Dir is one directory of a cache and the variables set to its place
// inside.
type Dir struct {
	Name string
	Env  []string
}

// Catalog lists the caches cordon knows, in the order they are shown.
// pnpm is not among them: the only variable naming its store that it
// reads (npm_config_store_dir) makes npm warn on every command.
var Catalog = []Kind{
	{"go", []Dir{{"build", []string{"GOCACHE"}}, {"mod", []string{"GOMODCACHE"}}}, "Go's build cache and module cache", nil},
	{"npm", []Dir{{"cache", []string{"npm_config_cache"}}}, "npm's package cache", []string{"npm_config_prefer_offline=true"}},
	{"yarn", []Dir{{"cache", []string{"YARN_CACHE_FOLDER"}}}, "yarn's package cache", nil},
	{"pip", []Dir{{"cache", []string{"PIP_CACHE_DIR"}}}, "pip's download and wheel cache", nil},
	{"uv", []Dir{{"cache", []string{"UV_CACHE_DIR"}}}, "uv's cache", []string{"UV_OFFLINE=1"}},
	{"cargo", []Dir{{"home", []string{"CARGO_HOME"}}}, "cargo's home: its registry index, downloaded crates and git checkouts", []string{"CARGO_NET_OFFLINE=true"}},
}

// Names lists the names of the catalog.
func Names() []string {
	var out []string
	for _, k := range Catalog {
		out = append(out, k.Name)
	}
	return out
}

// Lookup returns the cache called name.
func Lookup(name string) (Kind, bool) {
	i := slices.IndexFunc(Catalog, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, false
	}
	return Catalog[i], true
}

// Auto, in a profile's caches, stands for every cache of the catalog.
const Auto = "auto"

// Expand turns a profile's caches (names, or auto) into the kinds they
// name, in the catalog's order.
func Expand(names []string) ([]Kind, error) {
	var out []Kind
	for _, k := range Catalog {
		if slices.Contains(names, Auto) || slices.Contains(names, k.Name) {
			out = append(out, k)
		}
	}
	for _, n := range names {
		if _, ok := Lookup(n); !ok && n != Auto {
			return nil, fmt.Errorf("unknown cache %q (known: %s, or auto)", n, strings.Join(Names(), ", "))
		}
	}
	return out, nil
}

// Bind is one cache directory: on the host and inside.
type Bind struct {
	Host, Target string
}

// Plan is what a sandbox gets of its agent's caches.
type Plan struct {
	// Store holds the agent's caches on the host.
	Store Store
	Kinds []Kind
	// Size bounds the agent's caches together, in bytes (0: unbounded).
	Size int64
	// Offline says the sandbox reaches no network (see Kind.Offline).
	Offline bool
}

// Binds lists the directories bound, host and inside.
func (p *Plan) Binds() []Bind {
	var out []Bind
	for _, k := range p.Kinds {
		for _, d := range k.Dirs {
			out = append(out, Bind{Host: p.Store.dir(k.Name, d.Name), Target: path.Join(Inside, k.Name, d.Name)})
		}
	}
	return out
}

// Env lists the variables the sandbox's environment gets, NAME=VALUE.
func (p *Plan) Env() []string {
	var out []string
	for _, k := range p.Kinds {
		for _, d := range k.Dirs {
			for _, v := range d.Env {
				out = append(out, v+"="+path.Join(Inside, k.Name, d.Name))
			}
		}
		if p.Offline {
			out = append(out, k.Offline...)
		}
	}
	return out
}

// Names lists the caches of the plan.
func (p *Plan) Names() []string {
	var out []string
	for _, k := range p.Kinds {
		out = append(out, k.Name)
	}
	return out
}

// BlockSize is the room each file of a cache counts for at least, in the
// bound on how many files the caches hold: Size/BlockSize.
const BlockSize = 4096

// Human writes n bytes for a person: 57.8 MiB.
func Human(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f, i = f/1024, i+1
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
