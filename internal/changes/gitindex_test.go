package changes

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// git runs git in dir, failing the test when it fails.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=T"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func keyOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	must(t, err)
	k, ok := indexKey(b)
	if !ok {
		t.Fatalf("the index of %s is not read as one", dir)
	}
	return k
}

// An index's key stays when git refreshes what it caches of the files'
// state (a status after their times changed), in every format version and
// object format, and changes with what is staged: a file added, a mode,
// an intent to add.
func TestIndexKey(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	for _, format := range []string{"sha1", "sha256"} {
		dir := t.TempDir()
		gitIn(t, dir, "init", "-q", "--object-format="+format)
		write(t, filepath.Join(dir, "a.txt"), "a\n", 0o644)
		write(t, filepath.Join(dir, "sub/b.txt"), "b\n", 0o644)
		write(t, filepath.Join(dir, "sub/c.txt"), "c\n", 0o644)
		gitIn(t, dir, "add", ".")
		gitIn(t, dir, "commit", "-qm", "one")
		base := keyOf(t, dir)

		later := time.Now().Add(time.Hour)
		for _, f := range []string{"a.txt", "sub/b.txt"} {
			must(t, os.Chtimes(filepath.Join(dir, f), later, later))
		}
		before, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
		gitIn(t, dir, "status", "--porcelain")
		after, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if string(before) == string(after) {
			t.Fatalf("%s: git status did not refresh the index: the test proves nothing", format)
		}
		if k := keyOf(t, dir); k != base {
			t.Errorf("%s: a refreshed index has another key", format)
		}
		for _, v := range []string{"4", "3", "2"} {
			gitIn(t, dir, "update-index", "--index-version", v)
			if k := keyOf(t, dir); k != base {
				t.Errorf("%s: index version %s has another key", format, v)
			}
		}
		gitIn(t, dir, "update-index", "--index-version", "4")
		gitIn(t, dir, "update-index", "--chmod=+x", "a.txt")
		if k := keyOf(t, dir); k == base {
			t.Errorf("%s: a mode staged leaves the key as it was", format)
		}
		gitIn(t, dir, "update-index", "--chmod=-x", "a.txt")
		if k := keyOf(t, dir); k != base {
			t.Errorf("%s: the mode staged back gives another key", format)
		}
		write(t, filepath.Join(dir, "sub/d.txt"), "d\n", 0o644)
		gitIn(t, dir, "add", "-N", "sub/d.txt")
		intent := keyOf(t, dir)
		if intent == base {
			t.Errorf("%s: an intent to add leaves the key as it was", format)
		}
		gitIn(t, dir, "add", "sub/d.txt")
		if k := keyOf(t, dir); k == base || k == intent {
			t.Errorf("%s: a file staged leaves the key as it was", format)
		}
		// A split index holds its entries elsewhere: not compared.
		gitIn(t, dir, "update-index", "--split-index")
		if b, err := os.ReadFile(filepath.Join(dir, ".git", "index")); err != nil {
			t.Fatal(err)
		} else if _, ok := indexKey(b); ok {
			t.Errorf("%s: a split index is compared by its own entries", format)
		}
	}
	for _, bad := range []string{"", "DIRC", "DIRC\x00\x00\x00\x02\x00\x00\x00\x05" + string(make([]byte, 40)), "DIRX\x00\x00\x00\x02\x00\x00\x00\x00" + string(make([]byte, 20))} {
		if _, ok := indexKey([]byte(bad)); ok {
			t.Errorf("%q is read as an index", bad)
		}
	}
}

// FuzzIndexKey: whatever the bytes, indexKey returns without a panic.
func FuzzIndexKey(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) { indexKey(b) })
}
