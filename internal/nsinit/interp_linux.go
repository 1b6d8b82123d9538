package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// interpreterMissing says why the program at path, which execve did not
// find, cannot start when the interpreter it asks for is not in the
// sandbox; "" when that is not the reason. The interpreter's path is the
// program's to choose: it is quoted, and a flag that would bind its
// directory is suggested only for a system directory of plain characters,
// never pasted from whatever the file says.
func interpreterMissing(path string) string {
	interp, link := missingInterpreter(path)
	switch {
	case interp == "":
		return ""
	case strings.HasSuffix(interp, "\r"):
		return fmt.Sprintf("its #! line ends with a carriage return (the script has CRLF line endings), so its interpreter is %q, which does not exist: convert the script's line endings to LF", interp)
	case link:
		return fmt.Sprintf("its interpreter %q is a link whose target is not in the sandbox", interp)
	}
	why := fmt.Sprintf("its interpreter %q is not in the sandbox", interp)
	if dir := filepath.Dir(interp); plainSystemDir(dir) {
		why += fmt.Sprintf(" (cordon run --ro %s binds it, as the profile's mounts can)", dir)
	} else {
		why += " (a --ro flag, or the profile's mounts, can bind it)"
	}
	return why
}

// plainSystemDir reports whether dir is one where programs' interpreters
// live (/lib*, /usr, /bin, /sbin, /opt), written in plain characters.
func plainSystemDir(dir string) bool {
	if len(dir) > 128 || strings.Trim(dir, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-/") != "" || strings.Contains(dir, "..") {
		return false
	}
	for _, p := range []string{"/lib", "/usr/", "/bin", "/sbin", "/opt/"} {
		if strings.HasPrefix(dir, p) {
			return true
		}
	}
	return false
}

// maxInterp bounds the interpreter's path that is read and reported.
const maxInterp = 256

// missingInterpreter names the interpreter the program at path asks for,
// its ELF loader (PT_INTERP) or a script's #! line, when the sandbox has
// nothing at that path, or only a link whose target is not there (link);
// "" otherwise. The program is the sandbox's to write: what is read of it
// is bounded, and anything unexpected is "".
func missingInterpreter(path string) (interp string, link bool) {
	// Never waiting, never a terminal: a FIFO or a device put at the
	// program's path since is no program.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	var head [256]byte // what the kernel reads of a #! line (BINPRM_BUF_SIZE)
	n, _ := f.ReadAt(head[:], 0)
	b := head[:n]
	switch {
	case bytes.HasPrefix(b, []byte("#!")):
		// As the kernel reads it: blanks are spaces and tabs, the line
		// ends at a line feed; a carriage return is part of it.
		line, _, found := bytes.Cut(b[2:], []byte("\n"))
		if !found && len(b) == len(head) {
			return "", false // the line goes on: not a name to guess
		}
		line = bytes.TrimLeft(line, " \t")
		if end := bytes.IndexAny(line, " \t"); end >= 0 {
			line = line[:end]
		}
		interp = string(line)
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		interp = elfInterp(f, b)
	}
	if interp == "" || interp[0] != '/' || len(interp) > maxInterp {
		return "", false
	}
	if _, err := os.Stat(interp); !errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	_, err = os.Lstat(interp)
	return interp, err == nil
}

// elfInterp reads the PT_INTERP of a 64-bit little-endian ELF file whose
// first bytes are head; "" when it has none or is not such a file.
func elfInterp(f *os.File, head []byte) string {
	const (
		ptInterp  = 3
		phentSize = 56
		maxPhnum  = 256
	)
	if len(head) < 64 || head[4] != 2 || head[5] != 1 { // ELFCLASS64, ELFDATA2LSB
		return ""
	}
	le := binary.LittleEndian
	phoff := le.Uint64(head[0x20:])
	phentsize, phnum := le.Uint16(head[0x36:]), le.Uint16(head[0x38:])
	if phentsize != phentSize || phnum > maxPhnum || phoff > 1<<30 {
		return ""
	}
	var ph [phentSize]byte
	for i := range uint64(phnum) {
		if n, _ := f.ReadAt(ph[:], int64(phoff+i*phentSize)); n != phentSize {
			return ""
		}
		if le.Uint32(ph[0:]) != ptInterp {
			continue
		}
		off, size := le.Uint64(ph[8:]), le.Uint64(ph[32:])
		if size == 0 || size > maxInterp || off > 1<<30 {
			return ""
		}
		buf := make([]byte, size)
		if n, _ := f.ReadAt(buf, int64(off)); uint64(n) != size {
			return ""
		}
		name, _, _ := bytes.Cut(buf, []byte{0})
		return string(name)
	}
	return ""
}
