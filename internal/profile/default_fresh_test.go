package profile

import (
	"reflect"
	"testing"
	"unsafe"
)

// scribble changes every value reachable from v, unexported fields,
// map entries and pointees included: what a caller of Default could change.
func scribble(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		scribble(v.Elem(), seen)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() {
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			scribble(f, seen)
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i), seen)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			if e.Kind() == reflect.Pointer && !e.IsNil() {
				scribble(e, seen) // the pointee, shared or not
				continue
			}
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			scribble(c, seen)
			v.SetMapIndex(k, c)
		}
		v.SetMapIndex(reflect.Zero(v.Type().Key()), reflect.Zero(v.Type().Elem()))
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i), seen)
		}
	}
}

// Default gives a value sharing nothing with the next call's: a caller
// that changes every part of its profile changes no other caller's.
func TestDefaultSharesNothing(t *testing.T) {
	parsed, err := Parse(DefaultName, defaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	a := Default()
	scribble(reflect.ValueOf(a), map[uintptr]bool{})
	if reflect.DeepEqual(a, parsed) {
		t.Fatal("scribble changed nothing")
	}
	if b := Default(); !reflect.DeepEqual(b, parsed) {
		t.Fatalf("a change to one Default() reached the next:\n%+v", b)
	}
}
