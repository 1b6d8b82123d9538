package lint

import "fmt"

func init() {
	register(Rule{
		Code: "CL303", Name: "protected-path-opened", Severity: Warning,
		Summary: "the profile lets the sandbox write a path the host's tools obey (git hooks or configuration, editor or agent settings), or bind a home directory or credentials writable",
		Why:     "git, editors and agents on the host run what these files say without asking: an agent that can write .git/config or .vscode/settings.json has its code run by the user's next git status or editor start, outside any sandbox",
		Fix:     "remove the entry from workspace.unprotect (and workspace.allow_sensitive), or review every run's changes to it before the host's tools read it",
		Check: func(c *Context, t *Target, r *Reporter) {
			ws := t.Profile.Workspace
			for i, u := range ws.Unprotect {
				r.At(t, fmt.Sprintf("workspace.unprotect[%d]", i), fmt.Sprintf("%s is writable inside the sandbox", u), "")
			}
			if ws.AllowSensitive {
				r.At(t, "workspace.allow_sensitive", "a home directory, or one holding credentials at any depth, may be the workspace or bound writable", "")
			}
		},
	})
}
