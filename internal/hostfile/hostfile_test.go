package hostfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// hostile lays out, in a fresh directory, a file cordon may read and the
// shapes a sandbox could leave in its place; the target of every link is a
// file the sandbox must not get cordon to touch.
func hostile(t *testing.T) (dir, secret string) {
	t.Helper()
	dir = t.TempDir()
	secret = filepath.Join(dir, "secret")
	must(t, os.WriteFile(secret, []byte("do not touch\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("plain\n"), 0o644))
	must(t, os.Symlink(secret, filepath.Join(dir, "link")))
	must(t, os.Mkdir(filepath.Join(dir, "real"), 0o755))
	must(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "linkdir")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(t, os.Link(secret, filepath.Join(dir, "hard")))
	must(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	return dir, secret
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// within fails the test if f does not return in time (a FIFO opened the
// ordinary way would block forever).
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked")
	}
}

func TestReadFile(t *testing.T) {
	dir, _ := hostile(t)
	must(t, os.WriteFile(filepath.Join(dir, "real", "f"), []byte("x"), 0o644))
	b, err := ReadFile(filepath.Join(dir, "plain"), 0)
	if err != nil || string(b) != "plain\n" {
		t.Fatalf("plain file: %q, %v", b, err)
	}
	for _, c := range []struct {
		name string
		want error
	}{
		{"link", ErrSymlink},
		{"linkdir/f", ErrSymlink},
		{"fifo", ErrNotFile},
		{"hard", ErrHardLink},
		{"zero", ErrSymlink},
		{"real", ErrNotFile},
	} {
		within(t, func() {
			_, err := ReadFile(filepath.Join(dir, c.name), 0)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, err, c.want)
			}
		})
	}
	if _, err := ReadFile(filepath.Join(dir, "plain"), 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the cap: %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	dir, secret := hostile(t)
	for _, c := range []struct {
		name string
		want error
	}{
		{"link", ErrSymlink},
		{"linkdir/out", ErrSymlink},
		{"fifo", ErrNotFile},
		{"hard", ErrHardLink},
		{"real", ErrNotFile},
	} {
		within(t, func() {
			err := WriteFile(filepath.Join(dir, c.name), []byte("hostile\n"), 0o644)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, err, c.want)
			}
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "do not touch\n" {
		t.Fatalf("the secret was written through: %q", b)
	}
	out := filepath.Join(dir, "out.json")
	must(t, WriteFile(out, []byte("one\n"), 0o644))
	must(t, WriteFile(out, []byte("two\n"), 0o644))
	if b, _ := os.ReadFile(out); string(b) != "two\n" {
		t.Fatalf("out: %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*cordon*"))
	if len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// A link, a FIFO or a hard link that appears after Prepare, while the
// sandbox runs, is refused when the file is written; and the directory is
// the one prepared, whatever its path names later.
func TestTargetAfterPrepare(t *testing.T) {
	dir, secret := hostile(t)
	for _, plant := range []func(p string) error{
		func(p string) error { return os.Symlink(secret, p) },
		func(p string) error { return syscall.Mkfifo(p, 0o644) },
		func(p string) error { return os.Link(secret, p) },
	} {
		p := filepath.Join(dir, "real", "out")
		tg, err := Prepare(p)
		must(t, err)
		must(t, plant(p))
		within(t, func() {
			if err := tg.Write([]byte("hostile\n"), 0o644); err == nil {
				t.Errorf("wrote through what was planted at %s", p)
			}
		})
		tg.Close()
		os.Remove(p)
	}
	if b, _ := os.ReadFile(secret); string(b) != "do not touch\n" {
		t.Fatalf("the secret was written through: %q", b)
	}

	// The prepared directory moves away and a link takes its name.
	sub := filepath.Join(dir, "moving")
	must(t, os.Mkdir(sub, 0o755))
	tg, err := Prepare(filepath.Join(sub, "out"))
	must(t, err)
	defer tg.Close()
	must(t, os.Rename(sub, filepath.Join(dir, "moved")))
	must(t, os.Symlink(filepath.Join(dir, "real"), sub))
	must(t, tg.Write([]byte("ok\n"), 0o644))
	if _, err := os.Stat(filepath.Join(dir, "moved", "out")); err != nil {
		t.Fatalf("not written in the prepared directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "real", "out")); err == nil {
		t.Fatal("written through the link that took the directory's name")
	}
}
