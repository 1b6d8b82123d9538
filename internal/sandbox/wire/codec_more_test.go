package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// eachBool visits each bool reachable from v, with a way to set it: fill sets
// them all true, so two swapped in the codec would still round-trip.
func eachBool(v reflect.Value, visit func(set func(bool))) {
	switch v.Kind() {
	case reflect.Bool:
		visit(func(b bool) { v.SetBool(b) })
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				eachBool(v.Field(i), visit)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			eachBool(v.Index(i), visit)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			eachBool(v.Elem(), visit)
		}
	}
}

// Every bool of the Spec (Landlock, Seccomp, each Weakening, each mount's
// Writable, Review, each Protect entry's ReadOnly...) reaches init as
// itself, alone: none is read into another's place.
func TestSpecEachBoolAlone(t *testing.T) {
	s := filledSpec()
	var sets []func(bool)
	eachBool(reflect.ValueOf(&s).Elem(), func(set func(bool)) { sets = append(sets, set) })
	for _, set := range sets {
		set(false)
	}
	for i, set := range sets {
		set(true)
		var buf bytes.Buffer
		if err := WriteSpec(&buf, &s); err != nil {
			t.Fatal(err)
		}
		got, _, err := ReadSpec(&buf)
		if err != nil || !reflect.DeepEqual(got, &s) {
			want, _ := json.Marshal(&s)
			have, _ := json.Marshal(got)
			t.Fatalf("bool %d alone: %v\nwant %s\n got %s", i, err, want, have)
		}
		set(false)
	}
	if len(sets) < 20 {
		t.Fatalf("only %d bools found", len(sets))
	}
}

func FuzzReadSpec(f *testing.F) {
	s := filledSpec()
	var buf bytes.Buffer
	WriteSpec(&buf, &s)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, err := ReadSpec(bytes.NewReader(b))
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := WriteSpec(&again, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), b[:again.Len()]) {
			t.Fatalf("a spec read does not write back as it was")
		}
	})
}

func FuzzStatusJSON(f *testing.F) {
	f.Add("error", "a\"\\\n<&>\u2028\xff", "x", uint64(1), -1)
	f.Fuzz(func(t *testing.T, ev, e, note string, id uint64, code int) {
		s := Status{Event: ev, Error: e, Note: note, Stage: e + note, ID: id, Code: code, Signal: code, Pid: -code, TmpUsed: int64(code)}
		want, _ := json.Marshal(s)
		if got := s.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		var back Status
		if err := json.Unmarshal(s.AppendJSON(nil), &back); err != nil {
			t.Fatal(err)
		}
	})
}
