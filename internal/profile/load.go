package profile

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
)

// Error is a problem in a profile, located in its source.
type Error struct {
	File  string // file name, or DefaultName
	Line  int    // 1-based; 0 when unknown
	Col   int    // 1-based; 0 when unknown
	Field string // YAML path of the field, e.g. "mounts[2].path"; may be empty
	Msg   string
	// Fix, when known, shows the value written as the field wants it.
	Fix string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one profile, in source order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

//go:generate go test -run TestDefaultGenerated -update

// Default returns the embedded default profile, a new value at each call.
// It is default.yaml as Parse reads it, written out as Go code
// (default_gen.go, kept in step by its test), so that a run on it parses
// no YAML.
func Default() *Profile { return defaultProfile() }

// maxFile is the largest profile LoadFile reads.
const maxFile = 1 << 20

// LoadFile reads and parses the profile at path: a regular file reached
// without symbolic links, as every file cordon reads where a sandbox may
// have been (see hostfile).
func LoadFile(path string) (*Profile, error) {
	data, err := hostfile.ReadFile(path, maxFile)
	if err != nil {
		return nil, fmt.Errorf("reading profile: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates a profile. name is used in error messages.
// Every error it returns is an Errors value.
func Parse(name string, data []byte) (p *Profile, err error) {
	// The YAML library can panic on some malformed input; a bad profile is
	// an error, never a crash.
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, Errors{{File: name, Msg: fmt.Sprintf("malformed YAML (the decoder failed: %v)", r)}}
		}
	}()
	return parse(name, data)
}

func parse(name string, data []byte) (*Profile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, Errors{{File: name, Msg: "profile is empty"}}
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, Errors{locate(name, err)}
	}
	if len(file.Docs) != 1 {
		return nil, Errors{{File: name, Msg: fmt.Sprintf("want exactly one YAML document, found %d", len(file.Docs))}}
	}
	if file.Docs[0].Body == nil {
		return nil, Errors{{File: name, Msg: "profile is empty"}}
	}
	src := newSource(name, file)
	sum := sha256.Sum256(data)
	src.digest = hex.EncodeToString(sum[:])
	var p Profile
	if sh := checkShape(src, file.Docs[0].Body, reflect.TypeFor[Profile]()); len(sh.errs) > 0 {
		return nil, sh.withValidation(file.Docs[0].Body, src)
	}
	if err := yaml.NodeToValue(file.Docs[0].Body, &p, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		e := locate(name, err)
		if e.Field == "" && e.Line > 0 {
			e.Field = src.fieldAt(e.Line, e.Col)
		}
		return nil, Errors{e}
	}
	if errs := p.validate(src); len(errs) > 0 {
		return nil, errs.sorted()
	}
	p.src = src
	return &p, nil
}

// withValidation adds to the unknown fields and wrong types found the
// invalid values of what is left, once the values of the wrong type are
// taken out (checkShape nulled them) and unknown fields ignored; a
// complaint about a field already reported is left out.
func (sh *shape) withValidation(body ast.Node, src *source) Errors {
	errs := sh.errs
	var p Profile
	if err := yaml.NodeToValue(body, &p); err == nil {
		for _, e := range p.validate(src) {
			if !sh.covers(e.Field) {
				errs = append(errs, e)
			}
		}
	}
	return errs.sorted()
}

// sorted orders errors by their position in the file; those without one
// come last, in the order they were found.
func (es Errors) sorted() Errors {
	line := func(e *Error) int {
		if e.Line == 0 {
			return math.MaxInt
		}
		return e.Line
	}
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(line(a), line(b)), cmp.Compare(a.Col, b.Col))
	})
	return es
}

// locate turns a decoder error into an Error with the position it carries.
func locate(name string, err error) *Error {
	e := &Error{File: name, Msg: err.Error()}
	var located interface {
		GetToken() *token.Token
		GetMessage() string
	}
	var typeErr *yaml.TypeError
	if errors.As(err, &located) {
		e.Msg = located.GetMessage()
		if errors.As(err, &typeErr) && typeErr.DstType != nil && typeErr.SrcType != nil {
			e.Msg = fmt.Sprintf("want %s, found %s", kindName(typeErr.DstType), kindName(typeErr.SrcType))
		}
		if tk := located.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Col = tk.Position.Line, tk.Position.Column
		}
	}
	return e
}

// kindName names a Go type the way a profile author thinks of it.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// source maps YAML paths to positions and back, for error messages.
type source struct {
	name string
	// digest is the SHA-256 of the text the profile was parsed from.
	digest string
	// keys holds where each field's key (or list item) starts; values
	// where its value starts when that is a scalar.
	keys, values map[string]*token.Position
}

func newSource(name string, file *ast.File) *source {
	s := &source{name: name, keys: map[string]*token.Position{}, values: map[string]*token.Position{}}
	for _, doc := range file.Docs {
		ast.Walk(s, doc)
	}
	return s
}

// Visit records the position of every mapping key and sequence element.
func (s *source) Visit(n ast.Node) ast.Visitor {
	switch v := n.(type) {
	case *ast.MappingValueNode:
		field := fieldName(v.GetPath())
		if tk := v.Key.GetToken(); tk != nil && tk.Position != nil {
			s.keys[field] = tk.Position
		}
		if _, scalar := v.Value.(ast.ScalarNode); scalar {
			if tk := v.Value.GetToken(); tk != nil && tk.Position != nil {
				s.values[field] = tk.Position
			}
		}
	case *ast.SequenceNode:
		for i, item := range v.Values {
			if tk := item.GetToken(); tk != nil && tk.Position != nil {
				s.keys[fmt.Sprintf("%s[%d]", fieldName(v.GetPath()), i)] = tk.Position
			}
		}
	}
	return s
}

// fieldName turns a goccy path ("$.mounts[0].path") into the form used in
// messages ("mounts[0].path").
func fieldName(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
}

// errorAt builds an Error for field, positioned at its value when that is a
// scalar, else at its key or, when the field is absent from the source, at
// its nearest present parent.
func (s *source) errorAt(field, format string, args ...any) *Error {
	e := &Error{File: s.name, Field: field, Msg: fmt.Sprintf(format, args...)}
	pos, ok := s.values[field]
	for f := field; !ok && f != ""; f = parent(f) {
		pos, ok = s.keys[f]
	}
	if ok {
		e.Line, e.Col = pos.Line, pos.Column
	}
	return e
}

// fieldAt finds the field whose key sits at or just before line:col.
func (s *source) fieldAt(line, col int) string {
	best, bestLine, bestCol := "", 0, 0
	for f, pos := range s.keys {
		if pos.Line > line || (pos.Line == line && pos.Column > col) {
			continue
		}
		if pos.Line > bestLine || (pos.Line == bestLine && pos.Column > bestCol) {
			best, bestLine, bestCol = f, pos.Line, pos.Column
		}
	}
	return best
}

func parent(field string) string {
	i := strings.LastIndexAny(field, ".[")
	if i < 0 {
		return ""
	}
	return field[:i]
}

// FileDigest is the SHA-256 (hex) of the text the profile was parsed from,
// "" for one built otherwise.
func (p *Profile) FileDigest() string {
	if p.src == nil {
		return ""
	}
	return p.src.digest
}
