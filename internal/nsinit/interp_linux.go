package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"syscall"
)

// missingInterpreter names the interpreter the program at path asks for,
// its ELF loader (PT_INTERP) or a script's #! line, when the sandbox has
// nothing at that path; "" otherwise. The program is the sandbox's to
// write: what is read of it is bounded, and anything unexpected is "".
func missingInterpreter(path string) string {
	// Never waiting: a FIFO put at the program's path since is no program.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	var head [256]byte // what the kernel reads of a #! line (BINPRM_BUF_SIZE)
	n, _ := f.ReadAt(head[:], 0)
	b := head[:n]
	interp := ""
	switch {
	case bytes.HasPrefix(b, []byte("#!")):
		line, _, _ := bytes.Cut(b[2:], []byte("\n"))
		if fields := bytes.Fields(line); len(fields) > 0 {
			interp = string(fields[0])
		}
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		interp = elfInterp(f, b)
	}
	if interp == "" || interp[0] != '/' {
		return ""
	}
	if _, err := os.Stat(interp); !errors.Is(err, os.ErrNotExist) {
		return ""
	}
	return interp
}

// elfInterp reads the PT_INTERP of a 64-bit little-endian ELF file whose
// first bytes are head; "" when it has none or is not such a file.
func elfInterp(f *os.File, head []byte) string {
	const (
		ptInterp  = 3
		phentSize = 56
		maxPhnum  = 256
		maxInterp = 4096
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
