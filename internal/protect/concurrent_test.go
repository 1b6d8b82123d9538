//go:build linux

package protect

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Runs in the same workspace plan at once: one removing its placeholders
// while another plans makes the other plan again, never fail it.
func TestMakeConcurrent(t *testing.T) {
	root := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p, err := Make(root, Options{})
				if err != nil {
					errs <- err
					return
				}
				p.Remove()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A path another run holds exclusively, as it does only to remove its
// placeholder, is not taken for the sandbox's without a lock on it (the
// removal would take the sandbox's bind of it away, and the sandbox could
// make the path): the plan waits for the removal and makes its own.
func TestMakeWaitsForRemoval(t *testing.T) {
	root := repo(t)
	dir := filepath.Join(root, ".vscode")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		os.Remove(dir)
		f.Close()
	}()
	p, err := Make(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	if !slices.Contains(p.Placeholders(), ".vscode") {
		t.Errorf("the plan took .vscode as it was, while another run removed it: placeholders %v", p.Placeholders())
	}
}

// A token is taken for no more than a placeholder cordon makes: one that
// names the user's files and directories, with their identities and
// contents, removes nothing (a journal file a sandbox planted could hold
// it).
func TestSweepTakesOnlyPlaceholders(t *testing.T) {
	root := repo(t)
	if err := os.WriteFile(filepath.Join(root, "src/empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "src/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "src/.git/commondir"), []byte("../x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, rel := range []string{"src/main.go", ".git/HEAD", "src/empty", "src/.git/commondir", ".bashrc"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, rel), &st); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		g := ghost{rel: rel, dev: st.Dev, ino: st.Ino, ctime: st.Ctim.Nano(), file: true, content: string(b)}
		tokens = append(tokens, g.token(root))
	}
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tokens = append(tokens, ghost{rel: ".", dev: st.Dev, ino: st.Ino, ctime: st.Ctim.Nano()}.token(root),
		ghost{rel: "../" + filepath.Base(empty)}.token(root))
	Sweep(tokens)
	for _, rel := range []string{"src/main.go", ".git/HEAD", "src/empty", "src/.git/commondir", ".bashrc"} {
		if _, err := os.Lstat(filepath.Join(root, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
	if _, err := os.Lstat(empty); err != nil {
		t.Errorf("outside the root: %v", err)
	}
}

// A placeholder is named before it is made as well as after: one whose
// cordon died in between (its token never written) is still removed, and
// what was there before, or came later, is not.
func TestSweepIntended(t *testing.T) {
	root := repo(t)
	var tokens []string
	p, err := Make(root, Options{Made: func(tok string) error { tokens = append(tokens, tok); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2*len(p.Placeholders()) {
		t.Fatalf("%d tokens for %d placeholders", len(tokens), len(p.Placeholders()))
	}
	for _, f := range p.held {
		f.Close() // as when cordon dies
	}
	p.held = nil
	// Killed after making the last placeholder, before naming it made.
	tokens = tokens[:len(tokens)-1]
	// A directory older than the token that names it about to be made
	// (the user's).
	old := filepath.Join(root, "src/old")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, ghost{rel: "src/old", ctime: time.Now().Add(-time.Minute).UnixNano()}.token(root))
	if n := Sweep(tokens); n != len(p.Placeholders()) {
		t.Errorf("removed %d, want %d", n, len(p.Placeholders()))
	}
	for _, g := range p.Placeholders() {
		if _, err := os.Lstat(filepath.Join(root, g)); err == nil {
			t.Errorf("placeholder %s left after Sweep", g)
		}
	}
	if _, err := os.Lstat(old); err != nil {
		t.Errorf("a directory made before the token named it: %v", err)
	}
}
