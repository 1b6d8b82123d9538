// Package bincode is the plain binary encoding cordon uses where it writes
// something only cordon reads and must not pay for reflection: the Spec a
// sandbox's init starts from, and the caches of its looks at a tree. Each
// value is written in order, numbers as varints, strings and collections
// length first; there are no field names, so a reader and a writer agree
// by version (a magic string the writer puts first).
//
// A Decoder's first error sticks: every later read returns a zero value,
// and End reports it. A count larger than the rest of the input could hold
// fails at once, and collections are made small (Prealloc) and grown as
// their entries are read, so a damaged or hostile input never makes an
// allocation larger than itself.
package bincode

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrDecode is what a Decoder reports for input it cannot read.
var ErrDecode = errors.New("undecodable input")

// Encoder appends values to B.
type Encoder struct{ B []byte }

// Uint appends v as an unsigned varint.
func (e *Encoder) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Int appends v as a signed varint.
func (e *Encoder) Int(v int64) { e.B = binary.AppendVarint(e.B, v) }

// String appends s, its length first.
func (e *Encoder) String(s string) { e.Uint(uint64(len(s))); e.B = append(e.B, s...) }

// Bool appends v as one byte, 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// Strings appends ss, its length first.
func (e *Encoder) Strings(ss []string) {
	e.Uint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
}

// Decoder reads what an Encoder appended, from B.
type Decoder struct {
	B   []byte
	err error
}

// Fail makes d fail, as when a value read is out of its range.
func (d *Decoder) Fail() { d.err, d.B = ErrDecode, nil }

// Uint reads an unsigned varint.
func (d *Decoder) Uint() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Int reads a signed varint.
func (d *Decoder) Int() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Small reads a signed varint that must fit an int32, as the sizes and
// numbers an int holds do on every platform.
func (d *Decoder) Small() int {
	v := d.Int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.Fail()
		return 0
	}
	return int(v)
}

// String reads a string.
func (d *Decoder) String() string {
	n := d.Uint()
	if n > uint64(len(d.B)) {
		d.Fail()
		return ""
	}
	s := string(d.B[:n])
	d.B = d.B[n:]
	return s
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	if len(d.B) == 0 || d.B[0] > 1 {
		d.Fail()
		return false
	}
	v := d.B[0] == 1
	d.B = d.B[1:]
	return v
}

// Strings reads a list of strings; nil when it is empty.
func (d *Decoder) Strings() []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, 0, Prealloc(n))
	for range n {
		ss = append(ss, d.String())
	}
	return ss
}

// Count reads a collection's length, which fails when the rest of the
// input could not hold that many entries of at least min bytes each.
func (d *Decoder) Count(min int) int {
	n := d.Uint()
	if n > uint64(len(d.B)/max(min, 1)) {
		d.Fail()
		return 0
	}
	return int(n)
}

// Prealloc is what a collection of n entries is made with before they
// are read: n, but no more than 1024, so that a count an input cannot
// back costs no more than its entries, which grow it as they are read.
func Prealloc(n int) int { return min(n, 1024) }

// Magic reads m, which must come next.
func (d *Decoder) Magic(m string) {
	if len(d.B) < len(m) || string(d.B[:len(m)]) != m {
		d.Fail()
		return
	}
	d.B = d.B[len(m):]
}

// End reports the first error, or an error when input is left unread.
func (d *Decoder) End() error {
	if d.err == nil && len(d.B) != 0 {
		d.Fail()
	}
	return d.err
}
