package server

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTarRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "deep", "a.txt"), []byte("hello"), 0o640)
	os.WriteFile(filepath.Join(src, "bad\xfe"), []byte("x"), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(src, "link"))
	os.Link(filepath.Join(src, "bad\xfe"), filepath.Join(src, "hard"))
	syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600)
	var archive, log bytes.Buffer
	sum, err := tarOut(src, &archive, &log)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Entries != 6 || sum.Bytes != 7 || sum.Skipped != 1 || !strings.Contains(log.String(), "fifo: left out") {
		t.Errorf("tar-out: %+v %s", sum, log.String())
	}
	in, err := tarIn(dst, bytes.NewReader(archive.Bytes()))
	if err != nil || in.Entries != 6 || in.Bytes != 7 {
		t.Fatalf("tar-in: %+v %v", in, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "sub", "deep", "a.txt")); string(b) != "hello" {
		t.Errorf("a.txt: %q", b)
	}
	if st, _ := os.Stat(filepath.Join(dst, "sub", "deep", "a.txt")); st == nil || st.Mode().Perm() != 0o640 {
		t.Errorf("a.txt mode: %v", st)
	}
	// A symlink is archived and extracted as a link, never followed.
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "/etc/passwd" {
		t.Errorf("link: %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "bad\xfe")); string(b) != "x" {
		t.Errorf("a name that is not UTF-8: %q", b)
	}
}

// archive builds a tar stream of the given headers, each file's content
// its name.
func archive(t *testing.T, hdrs ...*tar.Header) io.Reader {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(h.Name))
		}
	}
	tw.Close()
	return &b
}

// TestTarInRefuses: an archive cannot write outside its directory, nor
// make devices or FIFOs, nor go past its bounds.
func TestTarInRefuses(t *testing.T) {
	reg := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg} }
	link := func(name, target string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
	}
	tests := []struct {
		name string
		hdrs []*tar.Header
		want string
	}{
		{"an absolute name", []*tar.Header{reg("/abs")}, "an absolute name"},
		{"dot dot", []*tar.Header{reg("../escape")}, "a name with .."},
		{"dot dot inside", []*tar.Header{reg("a/../../escape")}, "a name with .."},
		{"through a link of the archive", []*tar.Header{link("l", "OUTSIDE"), reg("l/escape")}, "a symlink is not followed"},
		{"through a link already there", []*tar.Header{reg("pre/escape")}, "a symlink is not followed"},
		{"a hard link out", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../outside/victim"}}, "a name with .."},
		{"a hard link through a link", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "pre/victim"}}, "a symlink is not followed"},
		{"a device", []*tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, "are not extracted"},
		{"a FIFO", []*tar.Header{{Name: "fifo", Typeflag: tar.TypeFifo}}, "are not extracted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dir, outside := filepath.Join(base, "dir"), filepath.Join(base, "outside")
			os.Mkdir(dir, 0o755)
			os.Mkdir(outside, 0o755)
			os.WriteFile(filepath.Join(outside, "victim"), []byte("kept"), 0o644)
			os.Symlink(outside, filepath.Join(dir, "pre"))
			for _, h := range tt.hdrs {
				h.Linkname = strings.ReplaceAll(h.Linkname, "OUTSIDE", outside)
			}
			_, err := tarIn(dir, archive(t, tt.hdrs...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Errorf("something was written outside: %v", ents)
			}
			if _, err := os.Lstat(filepath.Join(base, "escape")); err == nil {
				t.Error("escape was written")
			}
		})
	}
	// A file named as a link already there replaces the link, and what it
	// pointed at is untouched.
	base := t.TempDir()
	dir, outside := filepath.Join(base, "dir"), filepath.Join(base, "outside")
	os.Mkdir(dir, 0o755)
	os.WriteFile(outside, []byte("kept"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "pre"))
	if _, err := tarIn(dir, archive(t, reg("pre"))); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "kept" {
		t.Errorf("the link's target was written: %q", b)
	}
	if st, _ := os.Lstat(filepath.Join(dir, "pre")); st == nil || !st.Mode().IsRegular() {
		t.Errorf("pre: %v", st)
	}
}

func TestTarInBounds(t *testing.T) {
	defer func(e, b int64) { tarMaxEntries, tarMaxBytes = e, b }(tarMaxEntries, tarMaxBytes)
	tarMaxEntries, tarMaxBytes = 3, 1<<20
	dir := t.TempDir()
	hdrs := []*tar.Header{}
	for _, n := range []string{"a", "b", "c", "d"} {
		hdrs = append(hdrs, &tar.Header{Name: n, Typeflag: tar.TypeReg, ModTime: time.Now()})
	}
	if sum, err := tarIn(dir, archive(t, hdrs...)); err == nil || !strings.Contains(err.Error(), "more than 3 entries") || sum.Entries != 4 {
		t.Errorf("entries: %+v %v", sum, err)
	}
	tarMaxEntries, tarMaxBytes = 10, 4096
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 8192, Mode: 0o644})
	tw.Write(make([]byte, 8192))
	tw.Close()
	if _, err := tarIn(t.TempDir(), &b); err == nil || !strings.Contains(err.Error(), "over 4096 bytes") {
		t.Errorf("bytes: %v", err)
	}
}

func TestParseSummary(t *testing.T) {
	if s, err := parseSummary(`{"entries":2,"bytes":10}`); err != nil || s.Entries != 2 || s.Bytes != 10 {
		t.Errorf("%+v %v", s, err)
	}
	for _, bad := range []string{"", `{"entries":-1,"bytes":0}`, `{"entries":1,"bytes":1e12}`, `{"entries":1} {}`, `{"entries":1,"x":2}`} {
		if _, err := parseSummary(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
