package profile

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// shape checks a profile's YAML against the Go types it decodes into and
// finds every unknown field and every value of the wrong type, where the
// decoder stops at the first. Each value of the wrong type is replaced by
// null in the tree, so that a lenient decode of what is left can still be
// validated and report the invalid values as well.
type shape struct {
	name    string
	src     *source
	anchors map[string]ast.Node
	errs    Errors
	// bad holds the fields reported here: a later complaint about them (a
	// misspelt field is also "missing") says nothing new.
	bad []string
	// depth bounds the walk: aliases can make a tree a cycle.
	depth int
}

// maxDepth is deeper than any profile nests.
const maxDepth = 64

var (
	bytesUnmarshaler     = reflect.TypeFor[yaml.BytesUnmarshaler]()
	interfaceUnmarshaler = reflect.TypeFor[yaml.InterfaceUnmarshaler]()
	textUnmarshaler      = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkShape walks root as a value of type t.
func checkShape(src *source, root ast.Node, t reflect.Type) *shape {
	s := &shape{name: src.name, src: src, anchors: map[string]ast.Node{}}
	// An alias may name an anchor under a field that is not checked (an
	// unknown one): record them all first.
	ast.Walk(anchorVisitor(s.anchors), root)
	s.value(root, t, "")
	return s
}

// value checks node as a value of type t at field, and reports whether it
// is of the wrong type (the caller then replaces it with null).
func (s *shape) value(node ast.Node, t reflect.Type, field string) (wrong bool) {
	if s.depth++; s.depth > maxDepth {
		return false // the decoder reports what is wrong with it
	}
	defer func() { s.depth-- }()
	node = s.resolve(node)
	if node == nil || node.Type() == ast.NullType {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isLeaf(t) {
		if plainFit(node, t) {
			return false
		}
		if err := yaml.NodeToValue(node, reflect.New(t).Interface(), yaml.Strict()); err != nil {
			e := locate(s.name, err)
			if e.Line == 0 {
				e.Line, e.Col = position(node)
			}
			e.Field = field
			e.Fix = shapeFix(node, t, field)
			if e.Line > 0 {
				// A list decoding itself names the item at fault.
				if f := s.src.fieldAt(e.Line, e.Col); strings.HasPrefix(f, field+"[") {
					e.Field = f
				}
			}
			s.report(e)
			return true
		}
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return s.mapping(node, field, t, func(key string, kv *ast.MappingValueNode, at string) bool {
			f, ok := structField(t, key)
			if !ok {
				line, col := position(kv.Key)
				s.report(&Error{File: s.name, Line: line, Col: col, Field: at, Msg: unknownField(key, yamlNames(t))})
				return false
			}
			return s.value(kv.Value, f.Type, at)
		})
	case reflect.Map:
		return s.mapping(node, field, t, func(_ string, kv *ast.MappingValueNode, at string) bool {
			return s.value(kv.Value, t.Elem(), at)
		})
	case reflect.Slice, reflect.Array:
		seq, ok := node.(*ast.SequenceNode)
		if !ok {
			s.wrongType(node, t, field)
			return true
		}
		for i, item := range seq.Values {
			if s.value(item, t.Elem(), fmt.Sprintf("%s[%d]", field, i)) {
				seq.Values[i] = null(item)
			}
		}
		return false
	}
	return false
}

// mapping checks the entries of node, which must be a mapping, with each:
// each returns whether the entry's value is of the wrong type.
func (s *shape) mapping(node ast.Node, field string, t reflect.Type, each func(key string, kv *ast.MappingValueNode, at string) bool) bool {
	var entries []*ast.MappingValueNode
	switch n := node.(type) {
	case *ast.MappingNode:
		entries = n.Values
	case *ast.MappingValueNode:
		entries = []*ast.MappingValueNode{n}
	default:
		s.wrongType(node, t, field)
		return true
	}
	for _, kv := range entries {
		if kv.Key.IsMergeKey() {
			// << merges the entries of another mapping (or a list of
			// them) into this one.
			if s.depth++; s.depth > maxDepth {
				return false
			}
			defer func() { s.depth-- }()
			merged := s.resolve(kv.Value)
			if seq, ok := merged.(*ast.SequenceNode); ok {
				for _, m := range seq.Values {
					s.mapping(s.resolve(m), field, t, each)
				}
			} else if merged != nil {
				s.mapping(merged, field, t, each)
			}
			continue
		}
		key := kv.Key.GetToken().Value
		at := key
		if field != "" {
			at = field + "." + key
		}
		if each(key, kv, at) {
			kv.Value = null(kv.Value)
		}
	}
	return false
}

// anchorVisitor records the nodes of anchors by name.
type anchorVisitor map[string]ast.Node

func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok {
		v[a.Name.GetToken().Value] = a.Value
	}
	return v
}

// resolve follows anchors (recording them), aliases and tags to the node
// that holds the value.
func (s *shape) resolve(node ast.Node) ast.Node {
	for range 64 {
		switch n := node.(type) {
		case *ast.AnchorNode:
			s.anchors[n.Name.GetToken().Value] = n.Value
			node = n.Value
		case *ast.AliasNode:
			node = s.anchors[n.Value.GetToken().Value]
		case *ast.TagNode:
			if _, scalar := n.Value.(ast.ScalarNode); scalar {
				return n // the tag says how to read the scalar
			}
			node = n.Value
		default:
			return node
		}
	}
	return node
}

func (s *shape) report(e *Error) {
	s.errs = append(s.errs, e)
	s.bad = append(s.bad, e.Field)
}

func (s *shape) wrongType(node ast.Node, t reflect.Type, field string) {
	line, col := position(node)
	s.report(&Error{File: s.name, Line: line, Col: col, Field: field,
		Msg: fmt.Sprintf("want %s, found %s", kindName(t), nodeKind(node)), Fix: shapeFix(node, t, field)})
}

// shapeFix shows the value node as the type t wants it, when it can: a
// value where a mapping is wanted as the mapping's first string field (a
// destination's dest, a mount's path), where a list is wanted as a list of
// it, a mapping or a list where one value is wanted as that value's place.
func shapeFix(node ast.Node, t reflect.Type, field string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	scalar := ""
	switch node.Type() {
	case ast.StringType, ast.IntegerType, ast.FloatType, ast.BoolType:
		scalar = node.GetToken().Value
	}
	switch {
	case scalar != "" && t.Kind() == reflect.Struct:
		if key := firstString(t); key != "" && strings.HasSuffix(field, "]") {
			return fmt.Sprintf("write each entry as a mapping, such as: - %s: %s", key, scalar)
		} else if key != "" {
			return fmt.Sprintf("write it as a mapping, such as: {%s: %s}", key, scalar)
		}
	case scalar != "" && t.Kind() == reflect.Slice:
		if key := firstString(t.Elem()); key != "" {
			return fmt.Sprintf("write it as a list of mappings, such as: - %s: %s", key, scalar)
		}
		return fmt.Sprintf("write it as a list, such as: [%s]", scalar)
	case scalar == "" && isLeaf(t):
		return fmt.Sprintf("write one value after the field's name, not %s, such as: %s: VALUE", nodeKind(node), lastName(field))
	}
	return ""
}

// firstString is the YAML name of t's first string field, when t is a
// struct; "" otherwise.
func firstString(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.IsExported() && name != "" && name != "-" && f.Type.Kind() == reflect.String {
			return name
		}
	}
	return ""
}

// lastName is the last name of a field's path: "path" of "mounts[2].path".
func lastName(field string) string {
	field = strings.TrimRight(field, "]0123456789[")
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[i+1:]
	}
	return field
}

// covers reports whether field is, or lies beneath, or is the intended
// name of, a field already reported.
func (s *shape) covers(field string) bool {
	for _, b := range s.bad {
		if field == b || strings.HasPrefix(field, b+".") || strings.HasPrefix(field, b+"[") {
			return true
		}
	}
	for _, e := range s.errs {
		if m := e.suggested(); m != "" && (field == m || strings.HasPrefix(field, m+".") || strings.HasPrefix(field, m+"[")) {
			return true
		}
	}
	return false
}

// isLeaf reports whether values of t are decoded as a whole: scalars, and
// types that decode themselves.
func isLeaf(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	if pt.Implements(bytesUnmarshaler) || pt.Implements(interfaceUnmarshaler) || pt.Implements(textUnmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		return false
	}
	return true
}

// plainFit reports, without decoding, the common scalars that decode
// into t: a string into a string, a whole number into an integer, true or
// false into a bool. The rest is decoded to find out.
func plainFit(node ast.Node, t reflect.Type) bool {
	switch node.Type() {
	case ast.StringType:
		return t == reflect.TypeFor[string]() || t == reflect.TypeFor[Quantity]()
	case ast.IntegerType:
		return t == reflect.TypeFor[int]()
	case ast.BoolType:
		return t == reflect.TypeFor[bool]()
	}
	return false
}

// structField finds the field of t written as key.
func structField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, ok := yamlName(f); ok && name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlName is the key a struct field is written as, if it is written.
func yamlName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

// yamlNames lists the keys of t's fields in declaration order.
func yamlNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if name, ok := yamlName(t.Field(i)); ok {
			names = append(names, name)
		}
	}
	return names
}

// unknownField says key is not a field here, with the field it is most
// likely a misspelling of, or the fields there are.
func unknownField(key string, known []string) string {
	if s := Suggest(key, known); s != "" {
		return fmt.Sprintf("unknown field %q; did you mean %q?", key, s)
	}
	return fmt.Sprintf("unknown field %q; the fields here are %s", key, strings.Join(known, ", "))
}

// suggested is the field an unknown-field error suggests, as a path.
func (e *Error) suggested() string {
	_, rest, ok := strings.Cut(e.Msg, "; did you mean \"")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "\"")
	if p := parent(e.Field); p != "" {
		return p + "." + name
	}
	return name
}

// Suggest returns the name in known closest to key, when it is close
// enough to be a misspelling: at most one edit in three letters. Profiles'
// fields and cordon's flags are matched with it.
func Suggest(key string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	k := norm(key)
	best, bestD := "", 0
	for _, c := range known {
		n := norm(c)
		if strings.ReplaceAll(n, "_", "") == strings.ReplaceAll(k, "_", "") {
			return c // cpuTime, cpu-time, CPU_TIME
		}
		d := editDistance(k, n)
		if d*3 <= len(n) && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// nodeKind names what a YAML node holds, as kindName names Go types.
func nodeKind(n ast.Node) string {
	switch n.Type() {
	case ast.BoolType:
		return "true or false"
	case ast.IntegerType:
		return "a whole number"
	case ast.FloatType, ast.InfinityType, ast.NanType:
		return "a number"
	case ast.StringType, ast.LiteralType:
		return "a string"
	case ast.SequenceType:
		return "a list"
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	}
	return n.Type().String()
}

// position is where n starts: a mapping at its first key.
func position(n ast.Node) (line, col int) {
	switch m := n.(type) {
	case nil:
		return 0, 0
	case *ast.MappingValueNode:
		return position(m.Key)
	case *ast.MappingNode:
		if !m.IsFlowStyle && len(m.Values) > 0 {
			return position(m.Values[0].Key)
		}
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line, tk.Position.Column
	}
	return 0, 0
}

// null is a null node where n was.
func null(n ast.Node) ast.Node {
	var pos *token.Position
	if n != nil && n.GetToken() != nil {
		pos = n.GetToken().Position
	}
	return ast.Null(token.New("null", "null", pos))
}
