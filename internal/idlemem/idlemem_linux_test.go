package idlemem

import (
	"crypto/sha256"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The pages picked are the whole pages of the loaded segments that are
// not writable, where the headers say the program is loaded: not its data,
// not the parts of pages it shares with them; and nothing of a program
// whose loader was asked to write into them, or whose headers do not say
// where they are themselves.
func TestReadOnly(t *testing.T) {
	const page = 0x1000
	static := []prog{
		{typ: ptPhdr, flags: 4, vaddr: 0x400040},
		{typ: ptLoad, flags: 5, vaddr: 0x400000, filesz: 0x2000},
		{typ: ptLoad, flags: 4, vaddr: 0x402000, filesz: 0x3800}, // ends inside a page
		{typ: ptLoad, flags: 6, vaddr: 0x406000, filesz: 0x1000, memsz: 0x9000},
	}
	noDynamic := func(uintptr, uint64) []dyn { t.Fatal("no dynamic section to read"); return nil }
	want := []span{{0x400000, 0x402000}, {0x402000, 0x405000}}
	if got := readOnly(static, 0x400040, page, noDynamic); !equal(got, want) {
		t.Errorf("a static program: got %x, want %x", got, want)
	}
	// Loaded elsewhere (position independent): the bias moves every span.
	if got := readOnly(static, 0x7f0000400040, page, noDynamic); !equal(got, []span{{0x7f0000400000, 0x7f0000402000}, {0x7f0000402000, 0x7f0000405000}}) {
		t.Errorf("a program loaded at a bias: got %x", got)
	}
	if got := readOnly(static[1:], 0x400040, page, noDynamic); got != nil {
		t.Errorf("headers that do not say where they are: got %x", got)
	}
	dynamic := append([]prog{{typ: ptDynamic, flags: 6, vaddr: 0x406100, memsz: 0x40}}, static...)
	for _, tt := range []struct {
		name    string
		entries []dyn
		want    []span
	}{
		{"no text relocations", []dyn{{tag: dtFlags, val: 0x8}, {tag: dtNull}, {tag: dtTextrel}}, want},
		{"DT_TEXTREL", []dyn{{tag: 1, val: 7}, {tag: dtTextrel}, {tag: dtNull}}, nil},
		{"DF_TEXTREL", []dyn{{tag: dtFlags, val: dfTextrel | 0x8}, {tag: dtNull}}, nil},
	} {
		got := readOnly(dynamic, 0x400040, page, func(addr uintptr, n uint64) []dyn {
			if addr != 0x406100 || n != 4 {
				t.Errorf("%s: the dynamic section read at %#x, %d entries", tt.name, addr, n)
			}
			return tt.entries
		})
		if !equal(got, tt.want) {
			t.Errorf("%s: got %x, want %x", tt.name, got, tt.want)
		}
	}
}

// A span is released only within one mapping of the program's own file,
// private and not writable: not where a packer put the segment in
// anonymous memory, not in another file's mapping, a writable or a shared
// one, not across two mappings; nothing when the code is in no file's.
func TestFileBacked(t *testing.T) {
	const maps = `00400000-00500000 r-xp 00000000 fe:00 42   /usr/bin/prog
00500000-00600000 r--p 00100000 fe:00 42   /usr/bin/prog
00600000-00700000 r--p 00000000 00:00 0
00700000-00800000 rw-p 00200000 fe:00 42   /usr/bin/prog
00800000-00900000 r--s 00300000 fe:00 42   /usr/bin/prog
00900000-00a00000 r--p 00000000 fe:00 77   /usr/lib/other
00a00000-00b00000 r--p 00400000 fe:00 42   /usr/bin/prog
00b00000-00c00000 r--p 00500000 fe:00 42   /usr/bin/prog
`
	spans := []span{
		{0x400000, 0x480000}, // code
		{0x500000, 0x600000}, // read-only data
		{0x600000, 0x700000}, // unpacked into anonymous memory
		{0x700000, 0x701000}, // writable
		{0x800000, 0x801000}, // shared
		{0x900000, 0x901000}, // another file
		{0xaff000, 0xb01000}, // across two mappings
	}
	want := spans[:2]
	if got := fileBacked(spans, strings.NewReader(maps), 0x400123); !equal(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	if got := fileBacked(spans, strings.NewReader(maps), 0x600123); got != nil {
		t.Errorf("code in anonymous memory: got %x, want none", got)
	}
}

func equal(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The program's read-only pages, mapped by reading them all, are unmapped
// by Program, and read again they hold what they held: the process goes
// on as before. What is mapped is read from /proc/self/pagemap, through a
// descriptor opened and a buffer made before, so that little code runs
// between the release and the count (each page it touches maps its
// neighbours too).
func TestProgramReleasesAndRestores(t *testing.T) {
	spans := spans()
	if len(spans) == 0 || !equal(spans, programSpans()) {
		t.Fatalf("the program's spans, checked against its mappings: %x, from its headers: %x", spans, programSpans())
	}
	if len(spans) == 0 {
		t.Fatal("no span of the test's own program found")
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skip(err)
	}
	defer pm.Close()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skip(err)
	}
	defer mem.Close()
	// Read through /proc/self/mem, a page is mapped as by a touch.
	sum := func(s span) [32]byte {
		b := make([]byte, s.end-s.start)
		if _, err := unix.Pread(int(mem.Fd()), b, int64(s.start)); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	page := uintptr(os.Getpagesize())
	var bufs [][]byte
	var sums [][32]byte
	for _, s := range spans {
		bufs = append(bufs, make([]byte, (s.end-s.start)/page*8))
		sums = append(sums, sum(s))
	}
	mapped := func() (n int) {
		for i, s := range spans {
			if _, err := unix.Pread(int(pm.Fd()), bufs[i], int64(s.start/page*8)); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < len(bufs[i]); j += 8 {
				if bufs[i][j+7]&0x80 != 0 { // bit 63: present
					n++
				}
			}
		}
		return n
	}
	before := mapped()
	Program()
	after := mapped()
	t.Logf("pages of the program mapped: %d before, %d after", before, after)
	if after*2 > before {
		t.Errorf("pages of the program mapped: %d before, %d after", before, after)
	}
	for i, s := range spans {
		if sum(s) != sums[i] {
			t.Errorf("the mapping at %#x changed once read again", s.start)
		}
	}
}
