package profile

import (
	"slices"
	"strings"
)

// ServerWrites is where the tools of the server a profile offers may
// write, by their constraints: the directories (as the constraints write
// them: relative ones from the workspace) that every path argument of
// every tool of the server not of the read class is held within by a
// constraint. bounded is false when one of those tools may write
// elsewhere: a path argument no constraint bounds, or no path argument
// at all (what it writes cannot be known). A server that only reads has
// bounded true and no directory.
//
// A server's sandbox need not be able to write anywhere else: a path the
// policy let through that the server walks to another file (a name
// swapped while it runs) then leads nowhere writable.
func (p *Profile) ServerWrites(server string) (dirs []string, bounded bool) {
	for _, name := range p.ToolNames() {
		s, _, ok := p.Upstream(name)
		t := p.Tools[name]
		if !ok || s != server || t.Deny || t.Class == "read" {
			continue
		}
		args := p.PathArgs(name)
		if len(args) == 0 {
			return nil, false
		}
		for _, arg := range args {
			var in []string
			for _, prog := range t.Checks() {
				if d, ok := prog.Within(arg); ok {
					in = d
					break
				}
			}
			if in == nil {
				return nil, false
			}
			dirs = append(dirs, in...)
		}
	}
	for i, d := range dirs {
		dirs[i] = strings.TrimSuffix(d, "/")
		if dirs[i] == "" {
			dirs[i] = "/"
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), true
}
