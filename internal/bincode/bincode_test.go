package bincode

import (
	"math"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	e := &Encoder{B: []byte("m1\n")}
	e.Uint(math.MaxUint64)
	e.Int(math.MinInt64)
	e.Int(-7)
	e.String("a\x00b\n")
	e.Bool(true)
	e.Bool(false)
	e.Strings([]string{"x", "", "yz"})
	e.Strings(nil)
	d := &Decoder{B: e.B}
	d.Magic("m1\n")
	u, i, s := d.Uint(), d.Int(), d.Small()
	str, t1, f1 := d.String(), d.Bool(), d.Bool()
	ss, none := d.Strings(), d.Strings()
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	if u != math.MaxUint64 || i != math.MinInt64 || s != -7 || str != "a\x00b\n" || !t1 || f1 ||
		!reflect.DeepEqual(ss, []string{"x", "", "yz"}) || none != nil {
		t.Fatalf("got %v %v %v %q %v %v %q %q", u, i, s, str, t1, f1, ss, none)
	}
}

func TestRefuses(t *testing.T) {
	for name, read := range map[string]func(*Decoder){
		"wrong magic":      func(d *Decoder) { d.Magic("m2\n") },
		"bool of 2":        func(d *Decoder) { d.Magic("m1\n"); d.Bool() },
		"string too long":  func(d *Decoder) { d.Magic("m1\n"); d.Uint(); _ = d.String() },
		"count too large":  func(d *Decoder) { d.Magic("m1\n"); d.Count(1) },
		"int past int32":   func(d *Decoder) { d.Magic("m1\n"); d.Small() },
		"bytes left over":  func(d *Decoder) { d.Magic("m1\n") },
		"reads past a cut": func(d *Decoder) { d.B = d.B[:4]; d.Magic("m1\n"); d.Uint(); d.Uint() },
	} {
		e := &Encoder{B: []byte("m1\n")}
		e.Uint(1 << 40)
		e.Uint(2)
		d := &Decoder{B: e.B}
		read(d)
		if d.End() == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
