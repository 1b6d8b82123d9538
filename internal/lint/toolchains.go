package lint

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

func init() {
	register(Rule{
		Code: "CL505", Name: "toolchain-reach", Severity: Error,
		Summary: "a toolchain reaches beyond what is approved or safe: auto under path ceilings, an install prefix outside the ceiling paths, or one cordon refuses to bind",
		Why:     "each toolchain binds a host directory the profile does not name (where the user's PATH leads): read access the ceilings and reviewers never saw",
		Fix:     "name the toolchains instead of auto and raise the ceiling paths to their install prefixes after review, or drop them",
		// Resolution reads this host (Context.Toolchains); without it,
		// only auto under path ceilings is checked.
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			var ceiling []string
			if g := p.Governance; g != nil && len(g.Ceilings.Paths)+len(g.Ceilings.Writable) > 0 {
				ceiling = append(append(ceiling, g.Ceilings.Paths...), g.Ceilings.Writable...)
			}
			for i, name := range p.Toolchains {
				if name == profile.Auto && ceiling != nil {
					r.At(t, fmt.Sprintf("toolchains[%d]", i), "auto binds the toolchain of whatever command a run starts: no ceiling bounds it in advance", "")
				}
			}
			if c.Toolchains == nil || len(p.Toolchains) == 0 {
				return
			}
			pl, err := toolchain.Resolve(p, "", *c.Toolchains)
			if err != nil {
				field, msg := "toolchains", err.Error()
				var perr *profile.Error
				if errors.As(err, &perr) {
					field, msg = perr.Field, perr.Msg
				}
				r.At(t, field, "on this host "+msg+": cordon run refuses it", "install the toolchain in a directory of its own, or drop it from toolchains")
				return
			}
			for _, e := range pl.Entries {
				if e.Bound && ceiling != nil && !under(e.Prefix, ceiling) {
					r.At(t, e.Field, fmt.Sprintf("%s binds %s on this host, outside the ceiling paths (%s)", e.Name, e.Prefix, strings.Join(ceiling, ", ")), "")
				}
			}
		},
	})
}
