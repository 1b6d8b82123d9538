package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

// fill gives every field of v that reaches init a value of its own, so
// that a field the codec leaves out fails the round trip.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(strings.Repeat("s\n\x00é", *n%3+1) + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * -1000003)
	case reflect.Uint64:
		v.SetUint(uint64(*n) << 40)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				fill(v.Field(i), n)
			}
		}
	default:
		panic("fill: add " + v.Kind().String())
	}
}

// filledSpec is a Spec with every field that reaches init set (see fill).
func filledSpec() Spec {
	var s Spec
	n := 0
	fill(reflect.ValueOf(&s).Elem(), &n)
	s.UID, s.GID = 1000, -1 // within an int32
	return s
}

func TestSpecRoundTrip(t *testing.T) {
	s := filledSpec()
	s.Mounts[0].Tree, s.Mounts[1].Tree, s.Layer.Tree = 9, 10, 11
	var buf bytes.Buffer
	if err := WriteSpec(&buf, &s); err != nil {
		t.Fatal(err)
	}
	buf.WriteString(Placed)
	got, rest, err := ReadSpec(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&s, got) {
		t.Fatalf("round trip lost something:\n%+v\n%+v", s, *got)
	}
	if b, _ := io.ReadAll(rest); string(b) != Placed {
		t.Fatalf("what follows the spec: %q", b)
	}
	// The empty Spec, as the smallest sandbox sends it.
	buf.Reset()
	WriteSpec(&buf, &Spec{})
	if got, _, err := ReadSpec(&buf); err != nil || !reflect.DeepEqual(got, &Spec{}) {
		t.Fatalf("empty spec: %v %+v", err, got)
	}
}

func TestSpecRefusesDamage(t *testing.T) {
	s := filledSpec()
	var buf bytes.Buffer
	WriteSpec(&buf, &s)
	whole := buf.Bytes()
	for cut := 0; cut < len(whole); cut += 7 {
		if _, _, err := ReadSpec(bytes.NewReader(whole[:cut])); err == nil {
			t.Fatalf("a spec cut to %d of %d bytes was read", cut, len(whole))
		}
	}
	// A body cut short under a length that says so.
	body := append([]byte(nil), whole[4:len(whole)-1]...)
	short := append([]byte{0, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	if _, _, err := ReadSpec(bytes.NewReader(short)); err == nil {
		t.Fatal("a spec missing its last byte was read")
	}
	if _, _, err := ReadSpec(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff})); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a spec of 4 GiB: %v", err)
	}
	old, _ := json.Marshal(&s)
	if _, _, err := ReadSpec(bytes.NewReader(old)); err == nil {
		t.Fatal("a spec in another format was read")
	}
}

// Init's reports are the JSON encoding/json would write, byte for byte.
func TestStatusJSON(t *testing.T) {
	var statuses []Status
	for _, s := range []Status{
		{Event: "exit"},
		{Event: "error", Stage: "building root", Error: "a \"b\" \\ c\n\t\r\b\f\x01 <&> \u2028 é \xff\xfe"},
		{Event: "started", ID: 1 << 63, Code: -1, Signal: 9, LandlockABI: 7, Pid: 2, Note: "x", TmpUsed: 1 << 40, OtherSignal: 25},
	} {
		statuses = append(statuses, s)
	}
	for c := range 256 {
		statuses = append(statuses, Status{Event: "e", Note: "x" + string([]byte{byte(c)}) + "y" + string(rune(c)) + string(rune(0x2000+c))})
	}
	for _, s := range statuses {
		want, _ := json.Marshal(s)
		if got := s.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
	}
}
