package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// bodyError is a request (its body, or what it asks) that was refused;
// status is the answer's: 400, or 413 for one over a size cap.
type bodyError struct {
	status int
	err    error
}

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// bodyStatus is the HTTP status of a refused body: 413 for one over its
// cap, 400 otherwise.
func bodyStatus(err error) int {
	var be *bodyError
	if errors.As(err, &be) {
		return be.status
	}
	return http.StatusBadRequest
}

// readStrict reads a JSON body of at most max bytes into v, strictly: one
// JSON value and nothing after it, no key twice in an object at any depth,
// and every key of a struct spelled exactly as its field (encoding/json
// alone would take "ARGS" for "args", and keep the last of two "args").
// An empty body leaves v as it is. The body is read once and checked in
// place: a large stdin is not copied again.
// A body refused as too large is still read, to a bound, before the
// answer, and the connection is then closed: a client that sends its
// whole body before it reads (Python's urllib, curl) gets the 413, not a
// connection reset by a server that stopped reading.
const (
	drainMax  = 64 << 20
	drainTime = 5 * time.Second
)

// drainRefused reads and drops what is left of r's body, at most drainMax
// bytes for at most drainTime, and has the connection closed after the
// answer.
func drainRefused(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(drainTime)) != nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, drainMax))
	rc.SetReadDeadline(time.Time{})
}

func readStrict(r *http.Request, w http.ResponseWriter, max int64, v any) error {
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= max {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			drainRefused(w, r)
			return &bodyError{http.StatusRequestEntityTooLarge, fmt.Errorf("the request body is over %d bytes", max)}
		}
		return &bodyError{http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)}
	}
	data := buf.Bytes()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := checkStrict(data, reflect.TypeOf(v)); err != nil {
		return &bodyError{http.StatusBadRequest, fmt.Errorf("the request body: %w", err)}
	}
	// checkStrict refused every key that is not a field's.
	if err := json.Unmarshal(data, v); err != nil {
		return &bodyError{http.StatusBadRequest, fmt.Errorf("the request body: %w", err)}
	}
	return nil
}

// checkStrict checks that data is one JSON value, that no object in it
// names a key twice, and that each key of an object decoded into a struct
// of type t is one of its fields' names exactly (not one differing in
// case only).
func checkStrict(data []byte, t reflect.Type) error {
	if !json.Valid(data) {
		// Say why: the JSON error, or data after the value.
		dec := json.NewDecoder(bytes.NewReader(data))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		return errors.New("data after the JSON value: send one JSON value")
	}
	sc := &scanner{b: data}
	return sc.value(t, "$", 0)
}

// maxDepth bounds how deep a body's values nest.
const maxDepth = 64

// scanner walks valid JSON without decoding its values: only keys are
// decoded (as encoding/json decodes them, escapes included).
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// str skips a string and returns it as written, quotes included.
func (s *scanner) str() []byte {
	start := s.i
	for s.i++; s.b[s.i] != '"'; s.i++ {
		if s.b[s.i] == '\\' {
			s.i++
		}
	}
	s.i++
	return s.b[start:s.i]
}

// value reads one value, as decoded into type t (nil: any), at path p,
// depth levels down.
func (s *scanner) value(t reflect.Type, p string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: nested deeper than %d", p, maxDepth)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s.space()
	switch s.b[s.i] {
	case '{':
		s.i++
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = jsonFields(t)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for {
			s.space()
			if s.b[s.i] == '}' {
				s.i++
				return nil
			}
			var key string
			if err := json.Unmarshal(s.str(), &key); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if seen[key] {
				return fmt.Errorf("%s: the key %q is given twice", p, key)
			}
			seen[key] = true
			next := elem
			if fields != nil {
				ft, ok := fields[key]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return fmt.Errorf("%s: the key %q is not %q: names are matched exactly", p, key, name)
						}
					}
					return fmt.Errorf("%s: unknown key %q", p, key)
				}
				next = ft
			}
			s.space()
			s.i++ // ':'
			if err := s.value(next, p+"."+key, depth+1); err != nil {
				return err
			}
			s.space()
			if s.b[s.i] == ',' {
				s.i++
			}
		}
	case '[':
		s.i++
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for n := 0; ; n++ {
			s.space()
			if s.b[s.i] == ']' {
				s.i++
				return nil
			}
			if c := s.b[s.i]; c == '{' || c == '[' {
				if err := s.value(elem, fmt.Sprintf("%s[%d]", p, n), depth+1); err != nil {
					return err
				}
			} else if err := s.value(elem, p, depth+1); err != nil {
				return err
			}
			s.space()
			if s.b[s.i] == ',' {
				s.i++
			}
		}
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\n\r", rune(s.b[s.i])) {
			s.i++
		}
	}
	return nil
}

// jsonFields are the JSON names of a struct's fields (embedded structs'
// included), with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
