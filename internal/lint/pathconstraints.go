package lint

import (
	"fmt"
	"slices"
	"strings"
)

func init() {
	register(Rule{
		Code: "CL907", Name: "path-constraint-never-matches", Severity: Warning,
		Summary: "a constraint compares a path argument as a string in a way no path can match: a relative startsWith, an endsWith with a trailing slash",
		Why:     "path arguments reach constraints resolved: absolute, cleaned, links followed (/work/app/notes/a.md); a relative prefix or a trailing slash never matches, and every call is refused without saying why to the profile's author",
		Fix:     "use the path methods: args.path.within(\"notes/\") for a directory and what is under it, args.path.glob(\"src/**/*.go\") for a pattern (relative ones from the workspace)",
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			for _, name := range p.ToolNames() {
				paths := p.PathArgs(name)
				for i, prog := range p.Tools[name].Checks() {
					for _, call := range prog.ArgCalls() {
						if !slices.Contains(paths, call.Arg) {
							continue
						}
						var why string
						switch {
						case call.Fn == "startsWith" && !strings.HasPrefix(call.Lit, "/"):
							why = fmt.Sprintf("args.%s.startsWith(%q) is never true: %s reaches the constraint as an absolute path", call.Arg, call.Lit, call.Arg)
						case call.Fn == "endsWith" && strings.HasSuffix(call.Lit, "/"):
							why = fmt.Sprintf("args.%s.endsWith(%q) is never true: %s reaches the constraint cleaned, without a trailing slash", call.Arg, call.Lit, call.Arg)
						default:
							continue
						}
						dir := strings.TrimPrefix(strings.TrimSuffix(call.Lit, "/"), "./")
						r.At(t, fmt.Sprintf("tools.%s.constraints[%d]", name, i), fmt.Sprintf("column %d: %s", call.Col, why),
							fmt.Sprintf("write args.%s.within(%q) for the directory and what is under it, or args.%s.glob(...) for a pattern", call.Arg, dir+"/", call.Arg))
					}
				}
			}
		},
	})
}
