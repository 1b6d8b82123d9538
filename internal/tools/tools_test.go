package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileTools(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.txt")
	if r, err := Do("write_file", Args{Path: path, Content: "0123456789"}); err != nil || r.Written != 10 {
		t.Fatalf("write: %+v %v", r, err)
	}
	if _, err := Do("write_file", Args{Path: path, Content: "!", Append: true}); err != nil {
		t.Fatal(err)
	}
	r, err := Do("read_file", Args{Path: path, MaxBytes: 4})
	if err != nil || r.Content != "0123" || !r.Truncated || r.Size != 11 {
		t.Fatalf("read, cut at 4 bytes: %+v %v", r, err)
	}
	os.WriteFile(filepath.Join(dir, "b.bin"), []byte{0xff, 0xfe, 0}, 0o644)
	if r, _ := Do("read_file", Args{Path: filepath.Join(dir, "b.bin")}); r.Encoding != "base64" || r.Content != "//4A" {
		t.Errorf("binary: %+v", r)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	r, err = Do("list_files", Args{Path: dir})
	if err != nil || len(r.Entries) != 3 || r.Entries[0] != (Entry{Name: "a.txt", Type: "file", Size: 11}) || r.Entries[2].Type != "dir" {
		t.Errorf("list: %+v %v", r, err)
	}
	for _, tt := range []struct {
		name string
		a    Args
		want string
	}{
		{"read_file", Args{Path: dir}, "is not a regular file"},
		{"read_file", Args{}, "path: missing"},
		{"read_file", Args{Path: path, MaxBytes: MaxBytes + 1}, "max_bytes: at most"},
		{"fetch", Args{URL: "http://example.org/", Method: "POST"}, "method: POST is not GET or HEAD"},
		{"shell", Args{}, "shell is not a built-in tool"},
	} {
		if _, err := Do(tt.name, tt.a); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %+v: got %v, want %q", tt.name, tt.a, err, tt.want)
		}
	}
}

// Main reads the arguments as JSON and prints a result, with an exit
// status for the tool's failure distinct from bad input.
func TestMainPrintsResults(t *testing.T) {
	var out bytes.Buffer
	if code := Main("read_file", nil, strings.NewReader(`{"path": "/nonexistent/x"}`), &out); code != 1 || !strings.Contains(out.String(), `"error":"resolve /nonexistent: no such file or directory"`) {
		t.Errorf("failed tool: %d %s", code, out.String())
	}
	out.Reset()
	if code := Main("read_file", nil, strings.NewReader(`{"pth": "x"}`), &out); code != 2 || !strings.Contains(out.String(), `unknown field \"pth\"`) {
		t.Errorf("bad arguments: %d %s", code, out.String())
	}
}
