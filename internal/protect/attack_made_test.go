//go:build linux

package protect

import (
	"os"
	"slices"
	"testing"
)

// A HEAD (or objects and refs) dropped into a directory that existed
// before the run makes it a repository, and hides nothing below it: a
// nested repository with core.fsmonitor, an .envrc and .vscode planted
// there are reported.
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

// A nested repository that existed before the run has a submodule; the
// run rewrites the submodule's repository configuration
// (.git/modules/NAME/config, core.fsmonitor), which `git status` in the
// nested repository runs: it is reported.
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

// Rootless, a directory the run leaves without read permission for its
// owner (chmod 0311: still traversable by name) cannot be listed by the
// unprivileged cordon after the run: FindMade names it, and does not say
// it looked at everything. As root the walk can read it; protected.txtar
// runs the same as an unprivileged user.
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
