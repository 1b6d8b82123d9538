//go:build linux

package protect

import (
	"os"
	"slices"
	"testing"
)

// Attack: a HEAD (or objects+refs) dropped into a directory that existed
// before the run makes FindMade take the directory as a repository whose
// watched files did not change, and it then looks at nothing below it:
// a nested repository with core.fsmonitor, an .envrc and .vscode planted
// there go unreported.
func TestAttackFindMadeHeadHidesSubtree(t *testing.T) {
	for _, marker := range []string{"HEAD", "objects+refs"} {
		t.Run(marker, func(t *testing.T) {
			root := t.TempDir()
			put(t, root+"/pkg/a.go", "package pkg\n")
			since := tick(t, root+"/pkg/a.go")
			if marker == "HEAD" {
				put(t, root+"/pkg/HEAD", "")
			} else {
				must(t, os.MkdirAll(root+"/pkg/objects", 0o755))
				must(t, os.MkdirAll(root+"/pkg/refs", 0o755))
			}
			put(t, root+"/pkg/proj/.git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
			put(t, root+"/pkg/.envrc", "touch /tmp/pwned\n")
			put(t, root+"/pkg/.vscode/tasks.json", "{}\n")
			found, complete, err := FindMade(root, since, nil, "")
			must(t, err)
			var rels []string
			for _, f := range found {
				rels = append(rels, f.Rel)
			}
			for _, want := range []string{"pkg/proj/.git", "pkg/.envrc", "pkg/.vscode"} {
				if !slices.Contains(rels, want) {
					t.Errorf("FindMade missed %s (found %v, complete %v)", want, rels, complete)
				}
			}
		})
	}
}

// Attack: a nested repository that existed before the run has a
// submodule; the run rewrites the submodule's repository configuration
// (.git/modules/NAME/config, core.fsmonitor), which `git status` in the
// nested repository runs. FindMade only looks at GitWatch in .git and does
// not descend into modules/.
func TestAttackFindMadeNestedSubmoduleConfig(t *testing.T) {
	root := t.TempDir()
	put(t, root+"/vendor/foo/.git/HEAD", "ref: refs/heads/main\n")
	put(t, root+"/vendor/foo/.git/config", "[core]\n")
	must(t, os.MkdirAll(root+"/vendor/foo/.git/objects", 0o755))
	must(t, os.MkdirAll(root+"/vendor/foo/.git/refs", 0o755))
	put(t, root+"/vendor/foo/.git/modules/sub/HEAD", "ref: refs/heads/main\n")
	put(t, root+"/vendor/foo/.git/modules/sub/config", "[core]\n")
	must(t, os.MkdirAll(root+"/vendor/foo/.git/modules/sub/objects", 0o755))
	must(t, os.MkdirAll(root+"/vendor/foo/.git/modules/sub/refs", 0o755))
	put(t, root+"/vendor/foo/sub/.git", "gitdir: ../.git/modules/sub\n")
	since := tick(t, root+"/vendor/foo/sub/.git")
	put(t, root+"/vendor/foo/.git/modules/sub/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	found, _, err := FindMade(root, since, nil, "")
	must(t, err)
	if len(found) == 0 {
		t.Errorf("FindMade missed the changed vendor/foo/.git/modules/sub/config")
	}
	if testing.Verbose() {
		t.Logf("found %+v", found)
	}
}

// Attack (rootless): a directory the run leaves without read permission for
// its owner (chmod 0311: still traversable by name) cannot be listed by the
// unprivileged cordon after the run, and FindMade skips it silently and
// says it looked at everything; the user's `cd hid/proj && git status`
// still reaches the planted repository. Review mode's capture opens such
// directories up (grant); direct mode does not. As root the walk can read
// it, so this only fails without privilege.
func TestAttackFindMadeUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root the walk reads a 0311 directory; run without privilege")
	}
	root := t.TempDir()
	since := tick(t, root)
	put(t, root+"/hid/proj/.git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	must(t, os.Chmod(root+"/hid", 0o311))
	t.Cleanup(func() { os.Chmod(root+"/hid", 0o755) })
	found, complete, err := FindMade(root, since, nil, "")
	must(t, err)
	if len(found) == 0 && complete {
		t.Errorf("FindMade found nothing under an unreadable directory and reported complete=true")
	}
}
