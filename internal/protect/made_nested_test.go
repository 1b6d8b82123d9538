//go:build linux

package protect

import (
	"os"
	"testing"
)

// A repository the run makes inside the workspace repository's data
// directories (refs, objects, logs) is a repository git uses: the index,
// which the run may write, can name it as a submodule (a gitlink entry at
// .git/refs/x), and the host's next git status runs git status in it,
// obeying its configuration (core.fsmonitor runs a command). The plan
// holds the workspace repository's own configuration and hooks, not
// these: the look after the run must report such a repository.
func TestFindMadeRepositoryInsideGitData(t *testing.T) {
	for _, top := range []string{"refs", "objects", "logs"} {
		t.Run(top, func(t *testing.T) {
			root := t.TempDir()
			put(t, root+"/.git/HEAD", "ref: refs/heads/main\n")
			must(t, os.MkdirAll(root+"/.git/objects", 0o755))
			must(t, os.MkdirAll(root+"/.git/refs/heads", 0o755))
			must(t, os.MkdirAll(root+"/.git/logs", 0o755))
			held, since := protected(t, root)
			r := root + "/.git/" + top + "/x/.git"
			put(t, r+"/HEAD", "ref: refs/heads/main\n")
			must(t, os.MkdirAll(r+"/objects", 0o755))
			must(t, os.MkdirAll(r+"/refs/heads", 0o755))
			put(t, r+"/config", "[core]\n\tfsmonitor = touch /tmp/pwned; false\n")
			found, _, err := FindMade(root, since, held, "")
			must(t, err)
			if len(found) == 0 {
				t.Errorf("a repository made at .git/%s/x/.git is not reported", top)
			}
		})
	}
}
