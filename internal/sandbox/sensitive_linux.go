package sandbox

import (
	"fmt"
	"os"

	"github.com/cordon-sandbox/cordon/internal/protect"
)

// refuseSensitive refuses, unless the profile allows it by name
// (workspace.allow_sensitive), a workspace in any mode (read-only and
// reviewed ones too: the sandbox reads what it holds) or a writable
// directory bound into the view that is a home directory, holds one, or
// holds a store of credentials at any depth (protect.Sensitive). The
// profile's read-only mounts are its own choice of what to show (/usr
// holds some system accounts' homes), and are not searched.
func refuseSensitive(spec *Spec, opts Options) error {
	ws := opts.Profile.Workspace
	if ws.AllowSensitive || weakened("protect") { // weakened: test builds only
		return nil
	}
	for _, m := range spec.Mounts {
		workspace := ws.Path != "" && m.Target == spec.Workdir
		if m.Device || !(m.Writable || workspace) {
			continue
		}
		if fi, err := os.Lstat(m.Source); err != nil || !fi.IsDir() {
			continue
		}
		if why := protect.SensitiveIn(m.Source, walkIndex(opts, m.Source)); why != "" {
			spec.release()
			what := "writable bind "
			if workspace {
				what = "workspace "
			}
			return setupErr(what+m.Source, fmt.Errorf("%s: %s", why, SensitiveRefusal))
		}
	}
	return nil
}
