package server

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/api"
)

func TestListDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o640)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("/etc/\xffpasswd", filepath.Join(dir, "link"))
	os.WriteFile(filepath.Join(dir, "bad\xfe.txt"), nil, 0o600)
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	var out bytes.Buffer
	if err := listDir(dir, 100, &out); err != nil {
		t.Fatal(err)
	}
	l, err := parseListing(out.Bytes(), 100)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	got := map[string]api.DirEntry{}
	for _, e := range l.Entries {
		got[rawName(e)] = e
	}
	if len(got) != 5 || l.Truncated {
		t.Fatalf("%+v", l)
	}
	if e := got["a.txt"]; e.Type != "file" || e.Size != 5 || e.Mode != "0640" || e.Modified.IsZero() || e.NameBase64 != nil {
		t.Errorf("a.txt: %+v", e)
	}
	if e := got["sub"]; e.Type != "dir" {
		t.Errorf("sub: %+v", e)
	}
	// A link is described, not followed; its target may be any bytes.
	if e := got["link"]; e.Type != "symlink" || e.Target != "/etc/\uFFFDpasswd" || string(e.TargetBase64) != "/etc/\xffpasswd" {
		t.Errorf("link: %+v", e)
	}
	if e := got["bad\xfe.txt"]; e.Name != "bad\uFFFD.txt" || string(e.NameBase64) != "bad\xfe.txt" {
		t.Errorf("a name that is not UTF-8: %+v", e)
	}
	if e := got["fifo"]; e.Type != "other" {
		t.Errorf("fifo: %+v", e)
	}
	// Cut at max, and said so.
	out.Reset()
	if err := listDir(dir, 2, &out); err != nil {
		t.Fatal(err)
	}
	if l, err := parseListing(out.Bytes(), 2); err != nil || len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("max 2: %+v %v", l, err)
	}
	if err := listDir(filepath.Join(dir, "a.txt"), 10, &out); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
}

// TestParseListingRefusesForgeries: what the sandbox sends is checked
// before it reaches a client.
func TestParseListingRefusesForgeries(t *testing.T) {
	entry := func(e api.DirEntry) string {
		b, _ := json.Marshal(api.DirListing{Entries: []api.DirEntry{e}})
		return string(b)
	}
	ok := api.DirEntry{Name: "a", Type: "file", Mode: "0644"}
	if _, err := parseListing([]byte(entry(ok)), 1); err != nil {
		t.Fatalf("a good listing: %v", err)
	}
	bad := map[string]string{
		"a path":               entry(api.DirEntry{Name: "../etc/passwd", Type: "file", Mode: "0644"}),
		"dot dot":              entry(api.DirEntry{Name: "..", Type: "dir", Mode: "0755"}),
		"empty":                entry(api.DirEntry{Name: "", Type: "file", Mode: "0644"}),
		"a NUL":                entry(api.DirEntry{Name: "a\x00b", Type: "file", Mode: "0644"}),
		"a slash in the bytes": entry(api.DirEntry{Name: "a\uFFFDb", NameBase64: []byte("a\xff/b"), Type: "file", Mode: "0644"}),
		"text not the bytes":   entry(api.DirEntry{Name: "innocent", NameBase64: []byte("evil\xff"), Type: "file", Mode: "0644"}),
		"bytes that are UTF-8": entry(api.DirEntry{Name: "x", NameBase64: []byte("x"), Type: "file", Mode: "0644"}),
		"a type":               entry(api.DirEntry{Name: "a", Type: "device", Mode: "0644"}),
		"a target on a file":   entry(api.DirEntry{Name: "a", Type: "file", Target: "/x", Mode: "0644"}),
		"a mode":               entry(api.DirEntry{Name: "a", Type: "file", Mode: "170000"}),
		"a size":               entry(api.DirEntry{Name: "a", Type: "file", Mode: "0644", Size: -1}),
		"too many":             `{"entries":[{"name":"a","type":"file","mode":"0644"},{"name":"b","type":"file","mode":"0644"}]}`,
		"an unknown field":     `{"entries":[],"path":"/","extra":1}`,
		"two values":           `{"entries":[]} {"entries":[]}`,
		"not JSON":             `total 0`,
	}
	for name, in := range bad {
		if _, err := parseListing([]byte(in), 1); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
}

func TestCappedBuffer(t *testing.T) {
	b := &cappedBuffer{max: 4}
	if n, err := b.Write([]byte("abc")); n != 3 || err != nil || b.over {
		t.Fatal(n, err)
	}
	if n, err := b.Write([]byte("defg")); n != 4 || err != nil || !b.over || b.String() != "abcd" {
		t.Fatalf("%d %v %v %q", n, err, b.over, b.String())
	}
}

// TestForwardBound: a sandbox's forwarded connections are counted and
// bounded, and released.
func TestForwardBound(t *testing.T) {
	s := &Server{}
	for i := 0; i < maxForwards; i++ {
		if !s.acquireForward("a") {
			t.Fatalf("connection %d refused", i)
		}
	}
	if s.acquireForward("a") {
		t.Error("a connection over the bound was taken")
	}
	if !s.acquireForward("b") {
		t.Error("another sandbox's connection was refused")
	}
	s.releaseForward("a")
	if !s.acquireForward("a") {
		t.Error("a released connection was not given again")
	}
	for i := 0; i < maxForwards; i++ {
		s.releaseForward("a")
	}
	s.releaseForward("b")
	if len(s.forwards) != 0 {
		t.Errorf("left: %v", s.forwards)
	}
}
