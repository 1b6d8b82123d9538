//go:build linux

package changes

import (
	"os"
	"testing"
)

// A repository inside another's data directories (objects, refs, logs,
// rr-cache) is still a repository git uses: the index may name it as a
// submodule (a gitlink entry at .git/refs/x, which git reads without
// checking the path), and git status, git diff and git commit then run
// git status inside it, obeying its configuration (core.fsmonitor runs a
// command) and its hooks. What such a repository holds that git would
// run or obey must be held like any repository's, not land as the outer
// repository's data.
func TestCaptureGitRepositoryInsideData(t *testing.T) {
	root(t)
	for _, top := range []string{"refs", "logs", "objects", "rr-cache"} {
		t.Run(top, func(t *testing.T) {
			e := newEnv(t)
			hostRepo(t, e.host)
			e.start()
			r := e.upper + "/.git/" + top + "/x/.git"
			must(t, os.MkdirAll(r+"/objects", 0o755))
			must(t, os.MkdirAll(r+"/refs/heads", 0o755))
			write(t, r+"/HEAD", "ref: refs/heads/main\n", 0o644)
			write(t, r+"/config", "[core]\n\tbare = false\n\tfsmonitor = touch pwned; false\n", 0o644)
			write(t, r+"/hooks/pre-commit", "#!/bin/sh\ntouch pwned\n", 0o755)
			s := e.mustCapture(t)
			checkProtected(t, s, map[string]bool{
				".git/" + top + "/x/.git/config":           true,
				".git/" + top + "/x/.git/hooks/pre-commit": true,
			})
		})
	}
}
