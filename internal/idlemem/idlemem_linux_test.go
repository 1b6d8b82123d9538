package idlemem

import (
	"crypto/sha256"
	"os"
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
	spans := programSpans()
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
