package cli

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/cache"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// cacheFlags are the flags of cordon cache list and clear.
type cacheFlags struct {
	json         bool
	state, agent string
}

func (f *cacheFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.StringVar(&f.state, "state", "", "cordon's state `DIR` (default: cordon run's, "+config.StateDir()+"; cordon serve keeps its agents' in its own, by default "+filepath.Join(config.StateDir(), "serve")+")")
	fs.StringVar(&f.agent, "agent", "", "only the caches of the agent `NAME`")
}

// cacheCmd implements cordon cache list and cordon cache clear [CACHE...].
func cacheCmd(e *env, sub string, args []string) int {
	fs := newFlags(e, "cache "+sub, "cache "+sub+" [flags]")
	var f cacheFlags
	f.register(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	state := f.state
	if state == "" {
		state = config.StateDir()
	}
	root := filepath.Join(state, "caches")
	agents, err := cache.Agents(root)
	if err != nil {
		return fail(e, fmt.Errorf("cache %s: %w", sub, err))
	}
	if f.agent != "" {
		if !slices.Contains(agents, f.agent) {
			return fail(e, fmt.Errorf("cache %s: agent %q has no caches in %s", sub, f.agent, root))
		}
		agents = []string{f.agent}
	}
	switch sub {
	case "list":
		if len(operands) > 0 {
			return fail(e, fmt.Errorf("cache list takes no operands (--agent NAME lists one agent's)"))
		}
		return cacheList(e, root, agents, f.json)
	case "clear":
		for _, n := range operands {
			if _, ok := cache.Lookup(n); !ok {
				return fail(e, fmt.Errorf("cache clear: unknown cache %q (known: %s)", n, strings.Join(cache.Names(), ", ")))
			}
		}
		return cacheClear(e, root, agents, operands, f.json)
	}
	return fail(e, fmt.Errorf("cache: list or clear"))
}

// cacheList prints each agent's caches: their size and when last used.
func cacheList(e *env, root string, agents []string, asJSON bool) int {
	all := []cache.Entry{}
	var errs []error
	for _, a := range agents {
		s, err := cache.Open(root, a)
		if err == nil {
			var entries []cache.Entry
			entries, err = s.List()
			all = append(all, entries...)
		}
		errs = append(errs, err)
	}
	if asJSON {
		if code := printJSON(e, all); code != 0 {
			return code
		}
	} else {
		if len(all) == 0 {
			fmt.Fprintf(e.stdout, "no caches in %s\n", termsafe.Line(root))
		}
		for _, en := range all {
			name := en.Name
			if en.Leftover {
				name = "(being removed)"
			}
			fmt.Fprintf(e.stdout, "%-24s %-16s %10s %8d files  used %s\n", termsafe.Line(en.Agent), termsafe.Line(name), cache.Human(en.Bytes), en.Files, en.Used.Local().Format(time.DateTime))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fail(e, err)
	}
	return 0
}

// cacheClear empties the caches named (all, without names) of agents.
func cacheClear(e *env, root string, agents, names []string, asJSON bool) int {
	cleared := []cache.Entry{}
	var errs []error
	for _, a := range agents {
		s, err := cache.Open(root, a)
		if err == nil {
			var c []cache.Entry
			c, err = s.Clear(names)
			cleared = append(cleared, c...)
		}
		errs = append(errs, err)
	}
	if asJSON {
		printJSON(e, cleared)
	} else {
		if len(cleared) == 0 {
			fmt.Fprintln(e.stdout, "nothing to clear")
		}
		for _, en := range cleared {
			fmt.Fprintf(e.stdout, "cleared %s of %s (%s)\n", termsafe.Line(en.Name), termsafe.Line(en.Agent), cache.Human(en.Bytes))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fail(e, err)
	}
	return 0
}
