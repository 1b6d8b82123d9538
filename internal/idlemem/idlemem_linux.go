// Package idlemem gives back what a Go process that waits keeps resident
// without using it: the free pages of its heap, and the pages of its own
// program (code and read-only data) that starting it mapped. Those are
// the executable file's pages: unmapped, they stay in the page cache
// (which is memory still, shared by every process of the program, but
// the kernel reclaims it before mapped pages), and the next touch maps
// them again, as after the kernel reclaimed them under pressure.
//
// Only pages that read the same again from the file are released. The
// program's segments are found from its ELF program headers, which the
// kernel maps with it and names in the auxiliary vector: only those that
// are loaded and not writable, and none of a program whose dynamic
// section asks for relocations in them (text relocations, which no Go
// linker makes). Each must then lie within one mapping of the program's
// own file, private and not writable, as /proc/self/maps lists it when
// first asked: a program unpacked into anonymous memory (as packers do),
// or remapped, releases nothing. A debugger's breakpoints in the code,
// being writes to it, may go with its pages.
package idlemem

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Release returns the heap's free pages to the system, then unmaps the
// program's pages (see Program).
func Release() {
	debug.FreeOSMemory()
	Program()
}

// Program unmaps the program's pages that may be read again from its
// file. Unlike Release it runs no collection, which a process that has
// not yet needed one would pay for in memory: the collector's own
// structures.
func Program() {
	for _, s := range spans() {
		unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED)
	}
}

// spans are the program's pages to release, found once.
var spans = sync.OnceValue(func() []span {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	return fileBacked(programSpans(), f, codeAddr())
})

// codeAddr is an address in the program's code: readOnly's.
func codeAddr() uintptr {
	f := readOnly
	return **(**uintptr)(unsafe.Pointer(&f))
}

// fileBacked keeps the spans that lie each within one mapping that maps,
// private and not writable, the file that maps pc, as maps (the text of
// /proc/self/maps) lists them.
func fileBacked(spans []span, maps io.Reader, pc uintptr) []span {
	type mapping struct {
		span
		perms, file string
	}
	var all []mapping
	file := ""
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode [path]; inode 0 is no file.
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 || len(f[1]) != 4 || string(f[4]) == "0" {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		m := mapping{span{uintptr(start), uintptr(end)}, string(f[1]), string(f[3]) + " " + string(f[4])}
		all = append(all, m)
		if m.start <= pc && pc < m.end {
			file = m.file
		}
	}
	if sc.Err() != nil || file == "" {
		return nil
	}
	var out []span
	for _, s := range spans {
		for _, m := range all {
			if m.file == file && m.perms[1] == '-' && m.perms[3] == 'p' && m.start <= s.start && s.end <= m.end {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// span is a page-aligned range of the program's read-only pages.
type span struct{ start, end uintptr }

// prog is an ELF64 program header; dyn, an entry of the dynamic section.
type (
	prog struct {
		typ, flags                              uint32
		off, vaddr, paddr, filesz, memsz, align uint64
	}
	dyn struct {
		tag int64
		val uint64
	}
)

const (
	atPhdr  = 3 // auxiliary vector: where the program headers are mapped
	atPhent = 4 // the size of one
	atPhnum = 5 // how many

	ptLoad    = 1
	ptDynamic = 2
	ptPhdr    = 6
	pfW       = 2

	dtNull    = 0
	dtTextrel = 22
	dtFlags   = 30
	dfTextrel = 0x4
)

// programSpans finds the running program's read-only pages; none when its
// headers are not where and what a 64-bit ELF program's are.
func programSpans() []span {
	auxv, err := unix.Auxv()
	if err != nil {
		return nil
	}
	var phdr, phent, phnum uintptr
	for _, kv := range auxv {
		switch kv[0] {
		case atPhdr:
			phdr = kv[1]
		case atPhent:
			phent = kv[1]
		case atPhnum:
			phnum = kv[1]
		}
	}
	if phdr == 0 || phent != unsafe.Sizeof(prog{}) || phnum == 0 || phnum > 1024 {
		return nil
	}
	progs := unsafe.Slice((*prog)(at(phdr)), phnum)
	return readOnly(progs, phdr, uintptr(os.Getpagesize()), func(addr uintptr, n uint64) []dyn {
		return unsafe.Slice((*dyn)(at(addr)), n)
	})
}

// at is the memory at addr, which the kernel mapped (no Go object).
func at(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

// readOnly picks the whole pages of the loaded, not writable segments of
// the program whose headers progs are, mapped at phdr; dynamic reads its
// dynamic section. The load bias is where the headers are less where
// their own header (PT_PHDR) says; without one, nothing is picked.
func readOnly(progs []prog, phdr, page uintptr, dynamic func(addr uintptr, n uint64) []dyn) []span {
	bias, found := uintptr(0), false
	for _, p := range progs {
		if p.typ == ptPhdr {
			bias, found = phdr-uintptr(p.vaddr), true
		}
	}
	if !found {
		return nil
	}
	for _, p := range progs {
		if p.typ != ptDynamic {
			continue
		}
		for _, d := range dynamic(bias+uintptr(p.vaddr), p.memsz/uint64(unsafe.Sizeof(dyn{}))) {
			if d.tag == dtNull {
				break
			}
			if d.tag == dtTextrel || d.tag == dtFlags && d.val&dfTextrel != 0 {
				return nil // the loader wrote into read-only segments
			}
		}
	}
	var out []span
	for _, p := range progs {
		if p.typ != ptLoad || p.flags&pfW != 0 {
			continue
		}
		start := (bias + uintptr(p.vaddr) + page - 1) &^ (page - 1)
		end := (bias + uintptr(p.vaddr+p.filesz)) &^ (page - 1)
		if start < end {
			out = append(out, span{start, end})
		}
	}
	return out
}
