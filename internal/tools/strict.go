package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
)

// DecodeStrict decodes one JSON object into the struct v as the policy saw
// it: field names exactly as the struct's json tags spell them (Go's
// decoder would also take "Path" or "PATH" for "path", which a policy
// reading args.path never saw), no field the struct does not declare, and
// no key given twice at any depth (the policy's decoder keeps the last
// value, a tool's might keep another).
func DecodeStrict(data []byte, v any) error {
	if err := noDuplicates(json.NewDecoder(bytes.NewReader(data))); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return err
	}
	names := fieldNames(reflect.TypeOf(v).Elem())
	for k := range keys {
		if !names[k] {
			return fmt.Errorf("unknown field %q (fields are named exactly as the tool's schema spells them)", k)
		}
	}
	// One value only: json.Unmarshal above refused anything after it.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// fieldNames are the json names of a struct's fields.
func fieldNames(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		if name != "-" {
			out[name] = true
		}
	}
	return out
}

// foldKey is s with each letter replaced by the least of its Unicode
// case folds: "Kind", "kind" and "\u212aind" (the Kelvin sign) are one key.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

// noDuplicates reads one JSON value and refuses an object that names a
// key twice, at any depth.
func noDuplicates(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{} // by folded key
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if prev, ok := seen[foldKey(key)]; ok {
				if prev == key {
					return fmt.Errorf("field %q given twice", key)
				}
				// Go's decoder (and others) match names whatever their
				// case, Unicode's folds included: either may be taken.
				return fmt.Errorf("fields %q and %q differ only in case", prev, key)
			}
			seen[foldKey(key)] = key
			if err := noDuplicates(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := noDuplicates(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// NoDuplicates refuses a JSON value that names a key twice in an object,
// at any depth, or that is followed by anything but space.
func NoDuplicates(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := noDuplicates(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the arguments")
	}
	return nil
}
