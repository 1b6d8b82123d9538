package lint

import (
	"fmt"
	"strings"
)

func init() {
	register(Rule{
		Code: "CL301", Name: "write-outside-workspace", Severity: Error,
		Summary: "the sandbox may write to the whole file system, or to host paths outside the workspace without a stated reason",
		Why:     "what the sandbox writes outside its workspace stays on the host after the run: configuration, code others run, credentials",
		Fix:     "bind the path read-only, or state why the agent must write there (reason:)",
		Check: func(c *Context, t *Target, r *Reporter) {
			for i, m := range t.Profile.Mounts {
				if !m.Writable {
					continue
				}
				field := fmt.Sprintf("mounts[%d]", i)
				switch {
				case m.Path == "/":
					r.At(t, field+".writable", "the whole host file system is writable", "bind only what the agent needs, read-only")
				case strings.TrimSpace(m.Reason) == "":
					r.At(t, field+".writable", fmt.Sprintf("%s is writable, outside the workspace, with no reason given", m.Path), "")
				}
			}
			if t.Profile.Workspace.Path == "/" && t.Profile.Workspace.Writable {
				r.At(t, "workspace.path", "the workspace is the whole host file system, writable", "make the workspace the project directory")
			}
		},
	})
}
