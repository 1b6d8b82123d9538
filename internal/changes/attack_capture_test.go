//go:build linux

package changes

import (
	"testing"
)

// A profile that is not valid UTF-8 (one 0xff byte in a comment) or holds
// a NUL in a comment still loads (profile.Parse accepts it): the capture
// checks its content all the same, and flags it protected.
func TestAttackBinaryProfileNotProtected(t *testing.T) {
	e := newEnv(t)
	write(t, e.host+"/conf/dev.yaml", "version: 1\nagent: dev\n", 0o644)
	e.start()
	write(t, e.upper+"/conf/dev.yaml", "# \xff\nversion: 1\nagent: dev\nmounts:\n  - path: /srv\n    writable: true\n", 0o644)
	write(t, e.upper+"/conf/nul.yaml", "# \x00\nversion: 1\nagent: dev\n", 0o644)
	s := e.mustCapture(t)
	checkProtected(t, s, map[string]bool{"conf/dev.yaml": true, "conf/nul.yaml": true})
}
