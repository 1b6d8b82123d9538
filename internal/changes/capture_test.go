//go:build linux

package changes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A hand-made upper layer: whiteouts, an opaque directory, type changes, a
// touch that changes nothing, modes, links, a FIFO and a device.
func TestCaptureUpper(t *testing.T) {
	root(t)
	e := newEnv(t)
	h, u := e.host, e.upper
	write(t, h+"/same.txt", "same\n", 0o644)
	write(t, h+"/mod.txt", "old\n", 0o644)
	write(t, h+"/chmod.sh", "echo\n", 0o644)
	write(t, h+"/gone.txt", "x", 0o644)
	write(t, h+"/gonedir/a", "a", 0o644)
	write(t, h+"/gonedir/sub/b", "b", 0o644)
	write(t, h+"/opq/keep", "k", 0o644)
	write(t, h+"/opq/drop", "d", 0o644)
	write(t, h+"/opq/d/deep", "d", 0o644)
	write(t, h+"/f2d", "file", 0o644)
	write(t, h+"/d2l/x", "x", 0o644)
	write(t, h+"/samesize.txt", "aaaa", 0o644)
	must(t, os.MkdirAll(h+"/modedir", 0o755))
	must(t, os.Symlink("old-target", h+"/relink"))
	e.start()

	write(t, u+"/same.txt", "same\n", 0o644) // copied up by a touch
	write(t, u+"/mod.txt", "new\n", 0o644)
	write(t, u+"/chmod.sh", "echo\n", 0o755)
	write(t, u+"/samesize.txt", "bbbb", 0o644)
	whiteoutAt(t, u+"/gone.txt")
	whiteoutAt(t, u+"/gonedir")
	makeOpaque(t, u+"/opq")
	write(t, u+"/opq/keep", "k", 0o644)
	write(t, u+"/opq/new", "n", 0o644)
	write(t, u+"/f2d/inside", "i", 0o644)
	must(t, os.Symlink("/etc", u+"/d2l"))
	must(t, os.Symlink("new-target", u+"/relink"))
	must(t, os.Mkdir(u+"/sub", 0o755))
	must(t, os.Symlink("../../x", u+"/sub/up"))
	must(t, os.Mkdir(u+"/modedir", 0o700))
	must(t, os.Chmod(u+"/modedir", 0o700))
	write(t, u+"/suid", "s", 0o4755)
	write(t, u+"/bin", "a\x00b", 0o644)
	write(t, u+"/latin1", "caf\xe9", 0o644)
	must(t, unix.Mkfifo(u+"/fifo", 0o644))
	must(t, unix.Mknod(u+"/dev", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	must(t, os.Link(u+"/mod.txt", u+"/hardlink"))
	big, err := os.Create(u + "/big")
	must(t, err)
	must(t, big.Truncate(LargeSize+1))
	big.Close()

	s := e.mustCapture(t)
	want := []string{
		`added file "big" [binary,large]`,
		`added file "bin" [binary]`,
		`modified file "chmod.sh" [executable]`,
		`deleted dir "d2l"`,
		`added symlink "d2l" [outside_link]`,
		`deleted file "d2l/x"`,
		`added special "dev" [special]`,
		`deleted file "f2d"`,
		`added dir "f2d"`,
		`added file "f2d/inside"`,
		`added special "fifo" [special]`,
		`deleted file "gone.txt"`,
		`deleted dir "gonedir"`,
		`deleted file "gonedir/a"`,
		`deleted dir "gonedir/sub"`,
		`deleted file "gonedir/sub/b"`,
		`added file "hardlink"`,
		`added file "latin1" [binary]`,
		`modified file "mod.txt"`,
		`modified dir "modedir"`,
		`deleted dir "opq/d"`,
		`deleted file "opq/d/deep"`,
		`deleted file "opq/drop"`,
		`added file "opq/new"`,
		`modified symlink "relink"`,
		`modified file "samesize.txt"`,
		`added dir "sub"`,
		`added symlink "sub/up" [outside_link]`,
		`added file "suid" [executable,setuid]`,
	}
	// Sorted by path, a deletion before an addition of the same path.
	sameList(t, "changes", summaries(s.Changes), want)
	byPath := map[string]Change{}
	for _, c := range s.Changes {
		byPath[c.Kind+" "+c.Path] = c
	}
	if c := byPath["modified mod.txt"]; c.OldSize != 4 || c.Size != 4 || c.SHA256 == c.OldSHA256 || c.Base == nil || c.Base.Type != TypeFile {
		t.Errorf("mod.txt: %+v", c)
	}
	if c := byPath["modified chmod.sh"]; c.SHA256 != c.OldSHA256 || c.Mode != 0o755 || c.OldMode != 0o644 {
		t.Errorf("chmod.sh: %+v", c)
	}
	if c := byPath["modified relink"]; c.Target != "new-target" || c.OldTarget != "old-target" {
		t.Errorf("relink: %+v", c)
	}
	if c := byPath["modified modedir"]; c.Mode != 0o700 || c.OldMode != 0o755 {
		t.Errorf("modedir: %+v", c)
	}
	if c := byPath["added big"]; c.Size != LargeSize+1 || s.Bytes < LargeSize+1 {
		t.Errorf("big: %+v, set bytes %d", c, s.Bytes)
	}
	// Each new content is a blob, once.
	blobs, err := os.ReadDir(filepath.Join(e.state, testRun, blobDir))
	must(t, err)
	if n := len(blobs); n != 8 { // mod.txt and hardlink share one
		t.Errorf("%d blobs, want 8", n)
	}
	if got := readString(t, filepath.Join(e.state, testRun, blobDir, byPath["added hardlink"].SHA256)); got != "new\n" {
		t.Errorf("blob of hardlink: %q", got)
	}

	// Load reads back exactly what Capture wrote.
	l, err := Load(e.state, testRun)
	must(t, err)
	sameList(t, "loaded", summaries(l.Changes), want)
	if l.Digest != s.Digest || !l.Started.Equal(s.Started) || l.Workspace != e.host {
		t.Errorf("loaded %+v, captured %+v", l, s)
	}
	// A second capture of the same run is refused.
	if _, err := e.capture(t, Limits{}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second capture: %v", err)
	}
}

// A FIFO in the upper layer is listed without being opened: capture does
// not wait on it (a test that hangs here is the failure).
func TestCaptureFIFO(t *testing.T) {
	root(t)
	e := newEnv(t)
	e.start()
	must(t, unix.Mkfifo(e.upper+"/pipe", 0o666))
	s := e.mustCapture(t)
	sameList(t, "changes", summaries(s.Changes), []string{`added special "pipe" [special]`})
}

// An empty change set is written too.
func TestCaptureEmpty(t *testing.T) {
	e := newEnv(t)
	write(t, e.host+"/a", "a", 0o644)
	e.start()
	s := e.mustCapture(t)
	if len(s.Changes) != 0 {
		t.Fatalf("changes: %v", summaries(s.Changes))
	}
	l, err := Load(e.state, testRun)
	must(t, err)
	if len(l.Changes) != 0 || l.Digest != s.Digest {
		t.Errorf("loaded %+v", l)
	}
}

// Names with a line feed, escape sequences and bytes that are not UTF-8
// are kept exactly, through set.json, and land as they are.
func TestStrangeNames(t *testing.T) {
	e := newEnv(t)
	e.start()
	names := []string{"new\nline", "esc\x1b[31mred", "bad\xff\xfe", "tab\there"}
	for _, n := range names {
		write(t, e.upper+"/"+n, n, 0o644)
	}
	must(t, os.Symlink("to\n\xffthere", e.upper+"/link"))
	s := e.mustCapture(t)
	l, err := Load(e.state, testRun)
	must(t, err)
	got := map[string]bool{}
	for _, c := range l.Changes {
		got[c.Path] = true
		if c.Path == "link" && c.Target != "to\n\xffthere" {
			t.Errorf("link target %q", c.Target)
		}
	}
	for _, n := range names {
		if !got[n] {
			t.Errorf("%q lost; loaded %q", n, summaries(l.Changes))
		}
	}
	data := readString(t, filepath.Join(e.state, testRun, setFile))
	if strings.ContainsAny(data, "\x1b\xff") {
		t.Errorf("set.json holds raw control or invalid bytes")
	}
	rep, err := Apply(l, e.state, nil, ApplyOptions{})
	must(t, err)
	if len(rep.Conflicts) > 0 || len(rep.Applied) != len(s.Changes) {
		t.Fatalf("report %+v", rep)
	}
	for _, n := range names {
		if got := readString(t, e.host+"/"+n); got != n {
			t.Errorf("%q: %q", n, got)
		}
	}
	if tgt, _ := os.Readlink(e.host + "/link"); tgt != "to\n\xffthere" {
		t.Errorf("link: %q", tgt)
	}
}

// Limits: entries, bytes and depth beyond them are an error, and leave no
// change set behind.
func TestCaptureLimits(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		e := newEnv(t)
		e.start()
		for i := range 11 {
			write(t, filepath.Join(e.upper, "d", string(rune('a'+i))), "x", 0o644)
		}
		if _, err := e.capture(t, Limits{MaxEntries: 10}); err == nil || !strings.Contains(err.Error(), "more than 10 entries") {
			t.Fatalf("capture: %v", err)
		}
		noSet(t, e)
		if _, err := e.capture(t, Limits{MaxEntries: 12}); err != nil {
			t.Fatalf("within the limit: %v", err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		e := newEnv(t)
		e.start()
		write(t, e.upper+"/a", strings.Repeat("x", 600), 0o644)
		write(t, e.upper+"/b", strings.Repeat("y", 600), 0o644)
		if _, err := e.capture(t, Limits{MaxBytes: 1000}); err == nil || !strings.Contains(err.Error(), "more than 1000 bytes") {
			t.Fatalf("capture: %v", err)
		}
		noSet(t, e)
		if _, err := e.capture(t, Limits{MaxBytes: 1200}); err != nil {
			t.Fatalf("within the limit: %v", err)
		}
	})
	t.Run("depth", func(t *testing.T) {
		e := newEnv(t)
		e.start()
		p := e.upper
		for range maxDepth + 2 {
			p += "/d"
		}
		must(t, os.MkdirAll(p, 0o755))
		if _, err := e.capture(t, Limits{}); err == nil || !strings.Contains(err.Error(), "deeper than") {
			t.Fatalf("capture: %v", err)
		}
		noSet(t, e)
	})
}

func noSet(t *testing.T, e *env) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(e.state, testRun)); !os.IsNotExist(err) {
		t.Errorf("a failed capture left %s: %v", testRun, err)
	}
	if _, err := Load(e.state, testRun); err == nil {
		t.Errorf("a failed capture loads")
	}
}

// A symlink planted in the host tree before the run is never followed
// while capturing: a whiteout over it lists the link, not what it points
// to, and an upper directory over it is a type change.
func TestCaptureHostLinks(t *testing.T) {
	root(t)
	e := newEnv(t)
	outside := t.TempDir()
	write(t, outside+"/secret", "s", 0o600)
	must(t, os.Symlink(outside, e.host+"/planted"))
	must(t, os.Symlink(outside, e.host+"/planted2"))
	e.start()
	whiteoutAt(t, e.upper+"/planted")
	write(t, e.upper+"/planted2/secret", "t", 0o644)
	s := e.mustCapture(t)
	sameList(t, "changes", summaries(s.Changes), []string{
		`deleted symlink "planted"`,
		`deleted symlink "planted2"`,
		`added dir "planted2"`,
		`added file "planted2/secret"`,
	})
}

// The sniffer finds NULs and invalid UTF-8, whatever the writes' cuts.
func TestSniffer(t *testing.T) {
	for _, tc := range []struct {
		s      string
		binary bool
	}{
		{"plain text\n", false},
		{"caf\u00e9 \u4e16\u754c \U0001F600", false},
		{"a\x00b", true},
		{"caf\xe9", true},
		{"\xf0\x9f\x98", true}, // cut at the end
		{strings.Repeat("a", 9000) + "\x00", false},
	} {
		for cut := 1; cut <= 5; cut++ {
			sn := &sniffer{}
			b := []byte(tc.s)
			for i := 0; i < len(b); i += cut {
				sn.Write(b[i:min(i+cut, len(b))])
			}
			if sn.binary() != tc.binary {
				t.Errorf("%q in writes of %d: binary %v", tc.s[:min(len(tc.s), 20)], cut, sn.binary())
			}
		}
	}
}

// The host side never crosses a mount under the workspace: the sandbox's
// view has none, so what the layer says of a mount point's contents (a
// deletion, a change) cannot make capture read what is mounted there.
func TestCaptureNoMountCrossing(t *testing.T) {
	root(t)
	for _, tc := range []struct {
		name  string
		layer func(e *env)
	}{
		{"deleted", func(e *env) { whiteoutAt(t, e.upper+"/mnt") }},
		{"changed", func(e *env) { write(t, e.upper+"/mnt/secret", "new", 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			must(t, os.Mkdir(e.host+"/mnt", 0o755))
			must(t, unix.Mount("tmpfs", e.host+"/mnt", "tmpfs", 0, ""))
			defer unix.Unmount(e.host+"/mnt", unix.MNT_DETACH)
			write(t, e.host+"/mnt/secret", "mounted", 0o600)
			e.start()
			tc.layer(e)
			s, err := e.capture(t, Limits{})
			if err == nil {
				t.Fatalf("captured across a mount: %v", summaries(s.Changes))
			}
			if !strings.Contains(err.Error(), "cross-device") {
				t.Errorf("error %q, want the crossing named", err)
			}
			noSet(t, e)
		})
	}
}

// What the repository's own configuration makes git run or obey is
// flagged protected as .git/hooks is: a hooks directory core.hooksPath
// names, set in the host's tree or by the sandbox in the layer, and the
// repository a .git file points to.
func TestCaptureGitConfigured(t *testing.T) {
	root(t)
	t.Run("hooksPath", func(t *testing.T) {
		e := newEnv(t)
		write(t, e.host+"/.git/config", "[core]\n\thooksPath = .githooks\n", 0o644)
		e.start()
		write(t, e.upper+"/.githooks/pre-commit", "#!/bin/sh\n", 0o755)
		write(t, e.upper+"/src/main.go", "package main\n", 0o644)
		checkProtected(t, e.mustCapture(t), map[string]bool{".githooks/pre-commit": true, "src/main.go": false})
	})
	t.Run("hooksPath set in the layer", func(t *testing.T) {
		e := newEnv(t)
		write(t, e.host+"/.git/config", "[core]\n\tbare = false\n", 0o644)
		e.start()
		write(t, e.upper+"/.git/config", "[core]\n\thooksPath = tools\n", 0o644)
		write(t, e.upper+"/tools/post-checkout", "#!/bin/sh\n", 0o755)
		checkProtected(t, e.mustCapture(t), map[string]bool{".git/config": true, "tools/post-checkout": true})
	})
	t.Run("gitdir", func(t *testing.T) {
		e := newEnv(t)
		write(t, e.host+"/.git", "gitdir: .repo\n", 0o644)
		write(t, e.host+"/.repo/HEAD", "ref: refs/heads/main\n", 0o644)
		e.start()
		write(t, e.upper+"/.repo/config", "[core]\n\tfsmonitor = evil\n", 0o644)
		write(t, e.upper+"/.repo/hooks/post-checkout", "#!/bin/sh\n", 0o755)
		write(t, e.upper+"/README", "hi\n", 0o644)
		checkProtected(t, e.mustCapture(t), map[string]bool{".repo/config": true, ".repo/hooks/post-checkout": true, "README": false})
	})
}

// A file a live layer grows after capture looked at it (to a sparse
// terabyte) is read no further than its size then: the capture fails
// instead of reading without end.
func TestCaptureGrowingFile(t *testing.T) {
	root(t)
	for _, tc := range []struct{ name, host string }{
		{"same size as the host's", "12345678"},
		{"new", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.host != "" {
				write(t, e.host+"/f", tc.host, 0o644)
			}
			e.start()
			write(t, e.upper+"/f", "abcdefgh", 0o644)
			swapHook = func(d *os.File, name string) {
				if name == "f" && strings.HasSuffix(d.Name(), "upper") {
					if err := os.Truncate(e.upper+"/f", 1<<40); err != nil {
						t.Error(err)
					}
				}
			}
			defer func() { swapHook = nil }()
			done := make(chan error, 1)
			go func() { _, err := e.capture(t, Limits{}); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "changed while it was read") {
					t.Fatalf("capture: %v, want the growth named", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("capture still reading a minute later")
			}
			noSet(t, e)
		})
	}
}

// Paths and link texts are bounded in all, not only one by one: many long
// link targets (each escaped six times over in JSON) cannot make the set
// grow cordon's memory and its file without end.
func TestCaptureMetaBound(t *testing.T) {
	root(t)
	e := newEnv(t)
	e.start()
	target := strings.Repeat("<", 4000)
	for i := 0; i < maxMeta/4000+10; i++ {
		must(t, os.Symlink(target, fmt.Sprintf("%s/l%05d", e.upper, i)))
	}
	_, err := e.capture(t, Limits{})
	if err == nil || !strings.Contains(err.Error(), "bytes of paths and link texts") {
		t.Fatalf("capture: %v, want the bound named", err)
	}
	noSet(t, e)
}

// What git obeys however it is reached: a .git file naming the repository
// by an absolute path, a .git link, a bare repository planted anywhere, an
// absolute or linked core.hooksPath; and other tools' project files.
func TestCaptureGitReached(t *testing.T) {
	root(t)
	for _, tc := range []struct {
		name  string
		host  func(e *env)
		layer func(e *env)
		want  map[string]bool
	}{
		{"absolute gitdir", func(e *env) {
			write(t, e.host+"/.git", "gitdir: "+e.host+"/.repo\n", 0o644)
			write(t, e.host+"/.repo/HEAD", "ref: refs/heads/main\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/.repo/hooks/pre-commit", "#!/bin/sh\n", 0o755)
			write(t, e.upper+"/main.c", "int main;\n", 0o644)
		}, map[string]bool{".repo/hooks/pre-commit": true, "main.c": false}},
		{"a .git link", func(e *env) {
			write(t, e.host+"/.repo/projects/app.git/HEAD", "ref: refs/heads/main\n", 0o644)
			must(t, os.Symlink(".repo/projects/app.git", e.host+"/.git"))
		}, func(e *env) {
			write(t, e.upper+"/.repo/projects/app.git/hooks/pre-commit", "#!/bin/sh\n", 0o755)
			write(t, e.upper+"/.repo/projects/app.git/config", "[core]\n\tfsmonitor = x\n", 0o644)
		}, map[string]bool{".repo/projects/app.git/hooks/pre-commit": true, ".repo/projects/app.git/config": true}},
		{"a bare repository planted", func(e *env) {
			write(t, e.host+"/src/main.go", "package main\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/src/HEAD", "ref: refs/heads/main\n", 0o644)
			must(t, os.MkdirAll(e.upper+"/src/objects", 0o755))
			must(t, os.MkdirAll(e.upper+"/src/refs/heads", 0o755))
			write(t, e.upper+"/src/config", "[core]\n\tworktree = .\n\tfsmonitor = x\n", 0o644)
			write(t, e.upper+"/docs/README", "hi\n", 0o644)
		}, map[string]bool{"src/HEAD": true, "src/config": true, "src/objects": true, "docs/README": false}},
		{"a repository with a linked HEAD and objects that are files", func(e *env) {}, func(e *env) {
			must(t, os.MkdirAll(e.upper+"/src/refs", 0o755))
			write(t, e.upper+"/src/objects", "", 0o755)
			must(t, os.Symlink("refs/heads/main", e.upper+"/src/HEAD"))
			write(t, e.upper+"/src/config", "[core]\n\tfsmonitor = x\n", 0o644)
		}, map[string]bool{"src/config": true, "src/HEAD": true}},
		{"a work tree of a common directory", func(e *env) {}, func(e *env) {
			write(t, e.upper+"/wt/commondir", "../common\n", 0o644)
			write(t, e.upper+"/wt/config.worktree", "[core]\n\tfsmonitor = x\n", 0o644)
			write(t, e.upper+"/common/config", "[extensions]\n\tworktreeConfig = true\n", 0o644)
		}, map[string]bool{"wt/config.worktree": true}},
		{"python start-up files", func(e *env) {}, func(e *env) {
			write(t, e.upper+"/.venv/lib/python3.11/site-packages/zz.pth", "import os\n", 0o644)
			write(t, e.upper+"/.venv/bin/activate", "x\n", 0o644)
			write(t, e.upper+"/lib/sitecustomize.py", "x\n", 0o644)
			write(t, e.upper+"/lib/util.py", "x\n", 0o644)
		}, map[string]bool{".venv/lib/python3.11/site-packages/zz.pth": true, ".venv/bin/activate": true, "lib/sitecustomize.py": true, "lib/util.py": false}},
		{"absolute hooksPath", func(e *env) {
			write(t, e.host+"/.git/config", "[core]\n\thooksPath = "+e.host+"/tools\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/tools/pre-commit", "#!/bin/sh\n", 0o755)
		}, map[string]bool{"tools/pre-commit": true}},
		{"linked hooksPath", func(e *env) {
			write(t, e.host+"/.git/config", "[core]\n\thooksPath = .githooks\n", 0o644)
			must(t, os.MkdirAll(e.host+"/tools/hooks", 0o755))
			must(t, os.Symlink("tools/hooks", e.host+"/.githooks"))
		}, func(e *env) {
			write(t, e.upper+"/tools/hooks/pre-commit", "#!/bin/sh\n", 0o755)
		}, map[string]bool{"tools/hooks/pre-commit": true}},
		{"other tools' files", func(e *env) {}, func(e *env) {
			write(t, e.upper+"/.cargo/config.toml", "[build]\nrustc-wrapper = \"x\"\n", 0o644)
			write(t, e.upper+"/.devcontainer.json", "{}\n", 0o644)
			write(t, e.upper+"/app.code-workspace", "{}\n", 0o644)
			write(t, e.upper+"/.npmrc", "node-options=x\n", 0o644)
			write(t, e.upper+"/.gemini/settings.json", "{}\n", 0o644)
		}, map[string]bool{".cargo/config.toml": true, ".devcontainer.json": true, "app.code-workspace": true, ".npmrc": true, ".gemini/settings.json": true}},
		{"version control and package managers beyond git", func(e *env) {
			write(t, e.host+"/.hg/requires", "store\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/.hg/hgrc", "[hooks]\npre-status = touch /tmp/x\n", 0o644)
			write(t, e.upper+"/sub/.hg/hgrc", "[hooks]\npre-status = x\n", 0o644)
			write(t, e.upper+"/.jj/repo/config.toml", "[ui]\npager = \"x\"\n", 0o644)
			write(t, e.upper+"/.yarnrc.yml", "yarnPath: ./.y.cjs\n", 0o644)
			write(t, e.upper+"/.y.cjs", "x\n", 0o644)
			write(t, e.upper+"/.pnpmfile.cjs", "x\n", 0o644)
			write(t, e.upper+"/mise.toml", "[tasks.x]\n", 0o644)
		}, map[string]bool{".hg/hgrc": true, "sub/.hg/hgrc": true, ".jj/repo/config.toml": true, ".yarnrc.yml": true, ".pnpmfile.cjs": true, "mise.toml": true, ".y.cjs": false}},
		{"cordon's own files, by name and by content", func(e *env) {
			write(t, e.host+"/.cordon/mcp.yaml", "version: 1\nagent: a\n", 0o644)
		}, func(e *env) {
			write(t, e.upper+"/.cordon/mcp.yaml", "version: 1\nagent: a\nworkspace: {path: ., mode: direct}\n", 0o644)
			write(t, e.upper+"/agents/dev.approval.yaml", "x: 1\n", 0o644)
			write(t, e.upper+"/agents/dev.conf", "{version: 1, agent: dev, mounts: [{path: /root}]}\n", 0o644)
			write(t, e.upper+"/agents/notes.yaml", "version: 2\nauthor: x\n", 0o644)
		}, map[string]bool{".cordon/mcp.yaml": true, "agents/dev.approval.yaml": true, "agents/dev.conf": true, "agents/notes.yaml": false}},
		{"a repository at the root, waiting for its HEAD", func(e *env) {
			write(t, e.host+"/README", "x\n", 0o644)
		}, func(e *env) {
			must(t, os.MkdirAll(e.upper+"/objects", 0o755))
			must(t, os.MkdirAll(e.upper+"/refs/heads", 0o755))
			write(t, e.upper+"/config", "[core]\n\tbare = false\n\tworktree = .\n\tfsmonitor = x\n", 0o644)
			write(t, e.upper+"/src/main.go", "package main\n", 0o644)
		}, map[string]bool{"config": true, "objects": true, "refs": true, "src/main.go": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.host(e)
			e.start()
			tc.layer(e)
			checkProtected(t, e.mustCapture(t), tc.want)
		})
	}
}

// What anyone may write once it lands is flagged.
func TestCaptureWorldWritable(t *testing.T) {
	root(t)
	e := newEnv(t)
	e.start()
	write(t, e.upper+"/open", "x", 0o644)
	must(t, os.Chmod(e.upper+"/open", 0o666))
	must(t, os.Mkdir(e.upper+"/drop", 0o755))
	must(t, os.Chmod(e.upper+"/drop", 0o1777))
	write(t, e.upper+"/closed", "x", 0o644)
	s := e.mustCapture(t)
	for _, c := range s.Changes {
		if want := c.Path != "closed"; c.Has(FlagWorldWritable) != want {
			t.Errorf("%s: world_writable %v, want %v", c.Path, !want, want)
		}
	}
}

// A layer's git configuration past the bounds of following it (thousands
// of hooks paths through long link chains) cannot hold the capture up:
// past the bounds, every change is flagged protected.
func TestCaptureHooksPathBound(t *testing.T) {
	root(t)
	e := newEnv(t)
	e.start()
	deep := e.upper + "/d"
	for i := 0; i < 40; i++ {
		deep += "/d"
	}
	must(t, os.MkdirAll(deep, 0o755))
	must(t, os.Symlink(strings.TrimPrefix(deep, e.upper+"/")+"/m", e.upper+"/l"))
	must(t, os.Symlink(strings.Repeat("../", 41)+"l", deep+"/m"))
	var cfg strings.Builder
	cfg.WriteString("[core]\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&cfg, "\thookspath = l%d\n", i)
	}
	write(t, e.upper+"/.git/config", cfg.String(), 0o644)
	write(t, e.upper+"/plain.txt", "x", 0o644)
	done := make(chan *Set, 1)
	go func() { s, _ := e.capture(t, Limits{}); done <- s }()
	select {
	case s := <-done:
		if s == nil {
			t.Fatal("capture failed")
		}
		for _, c := range s.Changes {
			if c.Path == "plain.txt" && !c.Has(FlagProtected) {
				t.Error("past the bounds, plain.txt is not flagged")
			}
		}
	case <-time.After(time.Minute):
		t.Fatal("capture still running a minute later")
	}
}

// A set is judged against the tree as it will be: the host's and every set
// still held. A repository built across two sets is flagged in the second
// as in the first.
func TestCapturePendingSets(t *testing.T) {
	root(t)
	e := newEnv(t)
	write(t, e.host+"/README", "x\n", 0o644)
	e.start()
	must(t, os.MkdirAll(e.upper+"/objects", 0o755))
	must(t, os.MkdirAll(e.upper+"/refs/heads", 0o755))
	layer, err := os.Open(e.layer)
	must(t, err)
	defer layer.Close()
	first, err := Capture(layer, e.host, e.state, "run-0", e.started, Limits{})
	must(t, err)
	checkProtected(t, first, map[string]bool{"objects": true, "refs": true})

	// The second set writes only config: judged alone, it is a file named
	// config; with the first set held, it is a repository's.
	must(t, os.RemoveAll(e.upper))
	write(t, e.upper+"/config", "[core]\n\tfsmonitor = x\n", 0o644)
	write(t, e.upper+"/notes.txt", "x\n", 0o644)
	checkProtected(t, e.mustCapture(t), map[string]bool{"config": true, "notes.txt": false})

	// Once the first set is gone, config is no repository's.
	must(t, Discard(e.state, "run-0"))
	must(t, Discard(e.state, testRun))
	checkProtected(t, e.mustCapture(t), map[string]bool{"config": false})
}

// A link named as the start of a name of the catalog (.github for
// .github/workflows) is held: what is written through it later lands
// under the name it points to, which the catalog does not know.
func TestLinkStandingInForCatalogName(t *testing.T) {
	e := newEnv(t)
	e.start()
	write(t, filepath.Join(e.upper, "gh/workflows/ci.yml"), "on: push\n", 0o644)
	must(t, os.Symlink("gh", filepath.Join(e.upper, ".github")))
	must(t, os.Symlink("gh", filepath.Join(e.upper, "docs")))
	s := e.mustCapture(t)
	for _, c := range s.Changes {
		want := c.Path == ".github"
		if c.Has(FlagProtected) != want {
			t.Errorf("%s: flags %v", c.Path, c.Flags)
		}
	}
}
